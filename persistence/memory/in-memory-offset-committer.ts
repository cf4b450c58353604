import type { OffsetCommitter } from '../offset-committer';
import type { TopicPartition } from '../../core/persistence-types';
import { partitionKey } from './partition-key';

/** Remembers each partition's committed offset, as a consumer group would. */
export class InMemoryOffsetCommitter implements OffsetCommitter {
  private readonly offsets = new Map<string, number>();
  /** Every commit, in order, for tests. */
  readonly history: { partition: TopicPartition; offset: number }[] = [];

  async commit(partition: TopicPartition, offset: number): Promise<void> {
    this.offsets.set(partitionKey(partition), offset);
    this.history.push({ partition, offset });
  }

  committed(partition: TopicPartition): number | undefined {
    return this.offsets.get(partitionKey(partition));
  }
}
