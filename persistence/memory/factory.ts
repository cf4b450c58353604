import type { BackendFlow, PersistenceBackend } from '../backends';
import { StorePartitionPersistence } from '../store-partition-persistence';
import { InMemoryJournalStore } from './in-memory-journal-store';
import { InMemoryKeyStore } from './in-memory-key-store';
import { InMemorySnapshotStore } from './in-memory-snapshot-store';

/**
 * The `memory` backend: stores live in this process only, so state survives a rebalance that
 * gives a partition back to the same process but not a restart. For tests and trying things out.
 */
export function memoryBackend<S, V>(definition: BackendFlow<V>): PersistenceBackend<S, V> {
  const snapshots = new InMemorySnapshotStore<S>();
  const journal = new InMemoryJournalStore<V>();
  const keys = new InMemoryKeyStore();
  return {
    forPartition: async (owner) =>
      new StorePartitionPersistence<S, V>({
        partition: { topic: owner.topic, partition: owner.partition },
        mode: definition.persistence.mode,
        snapshots,
        journal,
        keys,
        committer: owner,
      }),
    close: async () => {},
  };
}
