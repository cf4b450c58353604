import type { TopicPartition } from '../core/persistence-types';

/** Which keys a partition has persisted state for: the list eager recovery walks. */
export interface KeyStore {
  add(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  remove(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  list(partition: TopicPartition): AsyncIterable<string>;
}
