import type { CommittedPosition, OffsetCommitter } from '../offset-committer';
import type { TopicPartition } from '../../core/persistence-types';
import { partitionKey } from './partition-key';

/** Remembers each partition's committed offset and its metadata, as a consumer group would. */
export class InMemoryOffsetCommitter implements OffsetCommitter {
  private readonly offsets = new Map<string, CommittedPosition>();
  /** Every commit, in order, for tests. */
  readonly history: { partition: TopicPartition; offset: number }[] = [];

  async commit(partition: TopicPartition, offset: number, metadata?: string): Promise<void> {
    this.offsets.set(partitionKey(partition), { offset: String(offset), metadata: metadata ?? null });
    this.history.push({ partition, offset });
  }

  committed(partition: TopicPartition): number | undefined {
    const position = this.offsets.get(partitionKey(partition));
    return position ? Number(position.offset) : undefined;
  }

  /** The committed offset with the metadata committed with it, as the group's OffsetFetch returns them. */
  position(partition: TopicPartition): CommittedPosition | undefined {
    return this.offsets.get(partitionKey(partition));
  }
}
