import type { KeyStore } from '../key-store';
import type { TopicPartition } from '../../core/persistence-types';
import { partitionKey } from './partition-key';

/** The keys of each partition in a Set. For tests, examples and the `memory` backend. */
export class InMemoryKeyStore implements KeyStore {
  private readonly partitions = new Map<string, Set<string>>();

  async add(partition: TopicPartition, keys: readonly string[]): Promise<void> {
    const id = partitionKey(partition);
    let stored = this.partitions.get(id);
    if (!stored) {
      stored = new Set();
      this.partitions.set(id, stored);
    }
    for (const key of keys) stored.add(key);
  }

  async remove(partition: TopicPartition, keys: readonly string[]): Promise<void> {
    const stored = this.partitions.get(partitionKey(partition));
    if (stored) for (const key of keys) stored.delete(key);
  }

  async *list(partition: TopicPartition): AsyncIterable<string> {
    yield* [...(this.partitions.get(partitionKey(partition)) ?? [])];
  }

  /** A partition's keys, for tests. */
  keys(partition: TopicPartition): Set<string> {
    return new Set(this.partitions.get(partitionKey(partition)));
  }
}
