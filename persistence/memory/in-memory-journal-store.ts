import type { JournalStore } from '../journal-store';
import type { JournalEvent, TopicPartition } from '../../core/persistence-types';
import { partitionKey } from './partition-key';

/** Per-key journals in arrays. For tests, examples and the `memory` backend. */
export class InMemoryJournalStore<V> implements JournalStore<V> {
  private readonly journals = new Map<string, JournalEvent<V>[]>();

  async append(partition: TopicPartition, key: string, events: readonly JournalEvent<V>[]): Promise<void> {
    const id = journalId(partition, key);
    const journal = this.journals.get(id);
    if (journal) journal.push(...events);
    else this.journals.set(id, [...events]);
  }

  async *read(partition: TopicPartition, key: string): AsyncIterable<JournalEvent<V>> {
    yield* [...(this.journals.get(journalId(partition, key)) ?? [])];
  }

  async delete(partition: TopicPartition, key: string): Promise<void> {
    this.journals.delete(journalId(partition, key));
  }

  /** A key's journal, for tests. */
  events(partition: TopicPartition, key: string): readonly JournalEvent<V>[] {
    return [...(this.journals.get(journalId(partition, key)) ?? [])];
  }
}

function journalId(partition: TopicPartition, key: string): string {
  return `${partitionKey(partition)}\u0000${key}`;
}
