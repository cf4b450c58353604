import type { SnapshotStore, SnapshotWrite } from '../snapshot-store';
import { isDeleteMarker, type Snapshot, type StoredKey, type TopicPartition, type WriteStatus } from '../../core/persistence-types';
import { partitionKey } from './partition-key';

export interface InMemorySnapshotStoreOptions {
  /**
   * Refuse a put whose offset is below the stored one (answer `not-applied`): the offset-gated
   * persist a custom store can use to keep a stale writer from overwriting newer state.
   */
  readonly offsetGated?: boolean;
}

/** Snapshots in a Map, per partition. For tests, examples and the `memory` backend. */
export class InMemorySnapshotStore<S> implements SnapshotStore<S> {
  private readonly partitions = new Map<string, Map<string, StoredKey<S>>>();
  private readonly offsetGated: boolean;
  /** Number of puts and deletes applied, for tests. */
  writes = 0;

  constructor(options: InMemorySnapshotStoreOptions = {}) {
    this.offsetGated = options.offsetGated ?? false;
  }

  async read(partition: TopicPartition, key: string): Promise<StoredKey<S> | undefined> {
    return this.partitions.get(partitionKey(partition))?.get(key);
  }

  /** Whether anything (a snapshot or a delete marker) is stored for the key, answered at once. */
  has(partition: TopicPartition, key: string): boolean {
    return this.partitions.get(partitionKey(partition))?.has(key) ?? false;
  }

  async *readAll(partition: TopicPartition): AsyncIterable<readonly [string, StoredKey<S>]> {
    const stored = this.partitions.get(partitionKey(partition));
    if (stored) yield* [...stored.entries()];
  }

  async writeBatch(partition: TopicPartition, writes: readonly SnapshotWrite<S>[]): Promise<WriteStatus[]> {
    const stored = this.partition(partition);
    return writes.map((w) => {
      if (w.kind === 'purge') {
        stored.delete(w.key);
        this.writes++;
        return 'applied';
      }
      const current = stored.get(w.key);
      if (w.kind === 'delete') {
        if (this.offsetGated && current && current.offset > w.offset) return 'not-applied';
        stored.set(w.key, { deleted: true, offset: w.offset });
        this.writes++;
        return 'applied';
      }
      // The same offset is a later write of the same key (a timer's fire changes state without a record).
      if (this.offsetGated && current && current.offset > w.snapshot.offset) return 'not-applied';
      stored.set(w.key, w.snapshot);
      this.writes++;
      return 'applied';
    });
  }

  /** Every live snapshot of a partition (delete markers left out), for tests and `inspect`. */
  entries(partition: TopicPartition): Map<string, Snapshot<S>> {
    const out = new Map<string, Snapshot<S>>();
    for (const [key, stored] of this.partitions.get(partitionKey(partition)) ?? []) if (!isDeleteMarker(stored)) out.set(key, stored);
    return out;
  }

  /** Delete markers not purged yet, for tests. */
  markers(partition: TopicPartition): Map<string, number> {
    const out = new Map<string, number>();
    for (const [key, stored] of this.partitions.get(partitionKey(partition)) ?? []) if (isDeleteMarker(stored)) out.set(key, stored.offset);
    return out;
  }

  /** Puts a snapshot directly, as another owner or a test fixture would. */
  set(partition: TopicPartition, key: string, snapshot: Snapshot<S>): void {
    this.partition(partition).set(key, snapshot);
  }

  private partition(partition: TopicPartition): Map<string, StoredKey<S>> {
    const id = partitionKey(partition);
    let stored = this.partitions.get(id);
    if (!stored) {
      stored = new Map();
      this.partitions.set(id, stored);
    }
    return stored;
  }
}
