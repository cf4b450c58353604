import { StorePartitionPersistence } from '../store-partition-persistence';
import type { PersistenceMode, TopicPartition } from '../../core/persistence-types';
import { InMemoryJournalStore } from './in-memory-journal-store';
import { InMemoryKeyStore } from './in-memory-key-store';
import { InMemoryOffsetCommitter } from './in-memory-offset-committer';
import { InMemoryOutputSender } from './in-memory-output-sender';
import { InMemorySnapshotStore, type InMemorySnapshotStoreOptions } from './in-memory-snapshot-store';

/**
 * One set of in-memory stores shared by all partitions of a flow — what the `memory` backend is,
 * and what a test restarts a partition against.
 */
export class InMemoryBackend<S, V> {
  readonly snapshots: InMemorySnapshotStore<S>;
  readonly journal = new InMemoryJournalStore<V>();
  readonly keys = new InMemoryKeyStore();
  readonly committer = new InMemoryOffsetCommitter();
  readonly outputs = new InMemoryOutputSender();

  constructor(options: InMemorySnapshotStoreOptions = {}) {
    this.snapshots = new InMemorySnapshotStore<S>(options);
  }

  forPartition(partition: TopicPartition, mode: PersistenceMode, maxWritesPerBatch?: number): StorePartitionPersistence<S, V> {
    return new StorePartitionPersistence<S, V>({
      partition,
      mode,
      snapshots: this.snapshots,
      journal: this.journal,
      keys: this.keys,
      committer: this.committer,
      outputs: this.outputs,
      maxWritesPerBatch,
    });
  }
}
