import type { SnapshotStore, SnapshotWrite } from '../snapshot-store';
import type { Snapshot, TopicPartition, WriteStatus } from '../types';
import { partitionKey } from './partition-key';

export interface InMemorySnapshotStoreOptions {
  /**
   * Refuse a put whose offset is not above the stored one (answer `not-applied`): the offset-gated
   * persist a custom store can use to keep a stale writer from overwriting newer state.
   */
  readonly offsetGated?: boolean;
}

/** Snapshots in a Map, per partition. For tests, examples and the `memory` backend. */
export class InMemorySnapshotStore<S> implements SnapshotStore<S> {
  private readonly partitions = new Map<string, Map<string, Snapshot<S>>>();
  private readonly offsetGated: boolean;
  /** Number of puts and deletes applied, for tests. */
  writes = 0;

  constructor(options: InMemorySnapshotStoreOptions = {}) {
    this.offsetGated = options.offsetGated ?? false;
  }

  async read(partition: TopicPartition, key: string): Promise<Snapshot<S> | undefined> {
    return this.partitions.get(partitionKey(partition))?.get(key);
  }

  async *readAll(partition: TopicPartition): AsyncIterable<readonly [string, Snapshot<S>]> {
    const stored = this.partitions.get(partitionKey(partition));
    if (stored) yield* [...stored.entries()];
  }

  async writeBatch(partition: TopicPartition, writes: readonly SnapshotWrite<S>[]): Promise<WriteStatus[]> {
    const stored = this.partition(partition);
    return writes.map((w) => {
      if (w.kind === 'delete') {
        stored.delete(w.key);
        this.writes++;
        return 'applied';
      }
      const current = stored.get(w.key);
      if (this.offsetGated && current && current.offset >= w.snapshot.offset) return 'not-applied';
      stored.set(w.key, w.snapshot);
      this.writes++;
      return 'applied';
    });
  }

  /** Everything stored for a partition, for tests and `inspect`. */
  entries(partition: TopicPartition): Map<string, Snapshot<S>> {
    return new Map(this.partitions.get(partitionKey(partition)));
  }

  /** Puts a snapshot directly, as another owner or a test fixture would. */
  set(partition: TopicPartition, key: string, snapshot: Snapshot<S>): void {
    this.partition(partition).set(key, snapshot);
  }

  private partition(partition: TopicPartition): Map<string, Snapshot<S>> {
    const id = partitionKey(partition);
    let stored = this.partitions.get(id);
    if (!stored) {
      stored = new Map();
      this.partitions.set(id, stored);
    }
    return stored;
  }
}
