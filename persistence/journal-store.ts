import type { JournalEvent, TopicPartition } from '../core/persistence-types';

/**
 * Per-key event journals: the records folded into a key, appended in offset order and replayed
 * through the fold on recovery. Replay skips events at or below the offset already applied, so an
 * append that is retried after a failure cannot apply an event twice.
 */
export interface JournalStore<V> {
  append(partition: TopicPartition, key: string, events: readonly JournalEvent<V>[]): Promise<void>;
  /** The key's events in offset order. */
  read(partition: TopicPartition, key: string): AsyncIterable<JournalEvent<V>>;
  delete(partition: TopicPartition, key: string): Promise<void>;
}
