import type { TopicPartition } from '../core/persistence-types';
import type { WriteGeneration } from './kafka/transactional-snapshot-writer';
import type { CommittedPosition, OffsetCommitter } from './offset-committer';

/**
 * The process that owns one input partition, as the partition's persistence sees it: one object
 * instead of loose callbacks. The worker builds one per recovery (workers/runtime/partition-owner.ts);
 * tools, benchmarks and tests use `fixedOwner`.
 */
export interface PartitionOwner extends TopicPartition, OffsetCommitter {
  readonly groupId: string;
  /** The generation (and member id) the partition was assigned in: what a backend fenced by generation number writes under (Cassandra). */
  readonly assigned: WriteGeneration;
  /**
   * The generation under which the process holds the partition now, read for each transaction:
   * the assignment's, or a later one when the partition came back to this process and kept its
   * state. A commit under it fails once the group has moved on without the process.
   */
  generation(): WriteGeneration;
  /**
   * Cooperative rebalancing: after the group refused a commit under `used` (it moved on meanwhile),
   * the generation of its next join if the process still holds the partition in it, else undefined.
   */
  nextGeneration?(used: WriteGeneration): Promise<WriteGeneration | undefined>;
  /**
   * Commits the input offset (the next one to consume) under the group generation the process
   * holds the partition in — for backends that do not commit inside their own transaction.
   */
  commit(partition: TopicPartition, offset: number, metadata?: string): Promise<void>;
  /**
   * The group's committed offset as the owner reads it (a stable read started at assignment,
   * overlapping the fence), called once the backend has fenced; undefined: none yet. Without it, a
   * backend that seeds its transactions with the committed offset reads it itself.
   */
  committedOffset?(): Promise<string | undefined>;
  /** The same read with the metadata committed with the offset (undefined: no commit yet). */
  committed?(): Promise<CommittedPosition | undefined>;
}

/**
 * An owner fixed at one generation: for tools (`inspect`), benchmarks and tests. Its commits go to
 * `commit` (default: nowhere).
 */
export function fixedOwner(o: TopicPartition & {
  groupId: string;
  generation: number;
  memberId?: string;
  commit?: OffsetCommitter['commit'];
  committedOffset?: () => Promise<string | undefined>;
}): PartitionOwner {
  const assigned = { generationId: o.generation, memberId: o.memberId ?? '' };
  return {
    topic: o.topic,
    partition: o.partition,
    groupId: o.groupId,
    assigned,
    generation: () => assigned,
    commit: o.commit ?? (async () => {}),
    ...(o.committedOffset ? { committedOffset: o.committedOffset } : {}),
  };
}
