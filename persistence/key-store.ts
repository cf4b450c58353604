import type { TopicPartition } from '../core/persistence-types';

/** Which keys a partition has persisted state for: the list eager recovery walks. */
export interface KeyStore {
  add(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  /**
   * Keys whose delete markers were just written: registered like `add`, but kept listed until
   * removed whatever expiry the store gives keys — a marker must be found by recovery until the
   * committed offset has passed it. Only a store whose keys can expire needs it; without it, they
   * go through `add` like any key.
   */
  pin?(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  remove(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  list(partition: TopicPartition): AsyncIterable<string>;
}
