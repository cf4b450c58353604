import type { JournalStore } from './journal-store';
import type { KeyStore } from './key-store';
import type { OffsetCommitter } from './offset-committer';
import type {
  KeyWrite,
  PartitionPersistence,
  RecoveredKey,
  WriteBatch,
  WriteBatchResult,
} from './partition-persistence';
import type { SnapshotStore, SnapshotWrite } from './snapshot-store';
import {
  type JournalEvent,
  type PersistenceMode,
  persistsJournal,
  persistsSnapshots,
  type TopicPartition,
  type WriteStatus,
} from './types';

export interface StorePartitionPersistenceOptions<S, V> {
  readonly partition: TopicPartition;
  /** Decides what recovery reads: snapshots (snapshot modes) or journals (journal mode). */
  readonly mode: PersistenceMode;
  readonly snapshots?: SnapshotStore<S>;
  readonly journal?: JournalStore<V>;
  /** Lists the keys to recover; without one, recovery walks the snapshot store. */
  readonly keys?: KeyStore;
  readonly committer: OffsetCommitter;
  readonly maxWritesPerBatch?: number;
}

/**
 * A PartitionPersistence made of separate stores and a committer, for backends without a
 * transaction spanning them (Cassandra, memory). Order per batch: journals, then snapshots, then
 * the key store, then — only if every write was applied — the offset commit. A crash between the
 * writes and the commit replays records already folded into snapshots; the snapshot offset makes
 * that replay a no-op.
 */
export class StorePartitionPersistence<S, V> implements PartitionPersistence<S, V> {
  readonly maxWritesPerBatch: number;
  private readonly o: StorePartitionPersistenceOptions<S, V>;

  constructor(options: StorePartitionPersistenceOptions<S, V>) {
    if (persistsSnapshots(options.mode) && !options.snapshots) {
      throw new TypeError(`persistence mode "${options.mode}" needs a SnapshotStore`);
    }
    if (persistsJournal(options.mode) && (!options.journal || !options.keys)) {
      throw new TypeError(`persistence mode "${options.mode}" needs a JournalStore and a KeyStore`);
    }
    this.o = options;
    this.maxWritesPerBatch = options.maxWritesPerBatch ?? Number.POSITIVE_INFINITY;
  }

  async *recover(): AsyncIterable<RecoveredKey<S, V>> {
    const { mode, partition, snapshots, keys } = this.o;
    if (mode === 'none') return;
    if (keys) {
      for await (const key of keys.list(partition)) {
        const found = await this.read(key);
        if (found) yield found;
      }
      return;
    }
    // Snapshot modes without a key store: the snapshot store itself knows the keys.
    for await (const [key, snapshot] of snapshots!.readAll(partition)) yield { key, snapshot };
  }

  async read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    const { mode, partition, snapshots, journal } = this.o;
    if (persistsSnapshots(mode)) {
      const snapshot = await snapshots!.read(partition, key);
      return snapshot ? { key, snapshot } : undefined;
    }
    if (mode === 'journal') {
      const events: JournalEvent<V>[] = [];
      for await (const event of journal!.read(partition, key)) events.push(event);
      return events.length > 0 ? { key, events } : undefined;
    }
    return undefined;
  }

  async write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    const { partition, snapshots, journal, keys, committer } = this.o;
    const { writes } = batch;
    const statuses: WriteStatus[] = new Array(writes.length).fill('applied');

    if (journal) {
      await Promise.all(
        writes.map((w) =>
          w.delete ? journal.delete(partition, w.key) : w.events?.length ? journal.append(partition, w.key, w.events) : undefined,
        ),
      );
    }

    if (snapshots) {
      const indexes: number[] = [];
      const snapshotWrites: SnapshotWrite<S>[] = [];
      writes.forEach((w, i) => {
        const sw = toSnapshotWrite(w);
        if (sw) {
          indexes.push(i);
          snapshotWrites.push(sw);
        }
      });
      if (snapshotWrites.length > 0) {
        const result = await snapshots.writeBatch(partition, snapshotWrites);
        result.forEach((status, j) => {
          statuses[indexes[j]!] = status;
        });
      }
    }

    if (keys) {
      const added = writes.filter((w, i) => w.addKey && !w.delete && statuses[i] === 'applied').map((w) => w.key);
      const removed = writes.filter((w, i) => w.delete && statuses[i] === 'applied').map((w) => w.key);
      if (added.length > 0) await keys.add(partition, added);
      if (removed.length > 0) await keys.remove(partition, removed);
    }

    if (batch.commitOffset !== undefined && statuses.every((s) => s === 'applied')) {
      try {
        await committer.commit(partition, batch.commitOffset);
      } catch (commitError) {
        // With no writes there is nothing to report but the failed commit itself.
        if (writes.length === 0) throw commitError;
        return { statuses, committed: false, commitError };
      }
      return { statuses, committed: true };
    }
    return { statuses, committed: false };
  }
}

function toSnapshotWrite<S, V>(w: KeyWrite<S, V>): SnapshotWrite<S> | undefined {
  if (w.delete) return { kind: 'delete', key: w.key, offset: w.delete.offset };
  if (w.snapshot) return { kind: 'put', key: w.key, snapshot: w.snapshot };
  return undefined;
}
