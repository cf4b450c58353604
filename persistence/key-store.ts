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
  /**
   * Keys written again that this engine holds as listed: kept listed without changing when they
   * were first listed. Another engine of the partition (a same-owner retry's previous engine, a
   * stale owner) may have purged such a key's marker and unlisted it after this engine's recovery
   * listed it. A store without it lists a key only when asked (`addKey`).
   */
  touch?(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  remove(partition: TopicPartition, keys: readonly string[]): Promise<void>;
  /** `onShare`: the share (0–1) of the listing done, when the store can tell (its segments queried). */
  list(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<string>;
}
