/**
 * The input-offset commit of a non-transactional backend (Cassandra): the group member's own
 * OffsetCommit, which kafkajs sends with the member's current generation and member id — so the
 * group coordinator refuses a member that a rebalance has left behind (ILLEGAL_GENERATION,
 * UNKNOWN_MEMBER_ID), and that refusal surfaces as the typed SnapshotWriteFencedError.
 *
 * The broker checks generation and member only, not which partitions the member owns: after a
 * rebalance a member commits under its new generation whatever the partition. So before asking
 * the broker, the committer checks the member's latest assignment (GroupMembership) still
 * holds the partition, and refuses locally otherwise.
 *
 * Structural types only: nothing outside kafka/ imports kafkajs.
 */
import { fenceReason, protocolErrorType } from '../../kafka/errors';
import { SnapshotWriteFencedError } from '../../core/fence-errors';
import { offsetToKafka } from '../../flow/offsets';
import type { OffsetCommitter } from '../offset-committer';
import type { TopicPartition } from '../../core/persistence-types';

/** The part of a kafkajs Consumer the committer uses. */
export interface GroupConsumer {
  commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string; metadata?: string }>): Promise<void>;
}

/** The member's latest join (kafka/ GroupMembership). */
export interface MembershipView {
  current(): { readonly generationId: number; readonly memberId: string; readonly assignment: Record<string, number[]> } | undefined;
}

export interface ConsumerOffsetCommitterOptions {
  /** The group member consuming the input (autoCommit off). */
  readonly consumer: GroupConsumer;
  /** Its membership, tracked from GROUP_JOIN: the local ownership check. */
  readonly membership: MembershipView;
}

export class ConsumerOffsetCommitter implements OffsetCommitter {
  private readonly o: ConsumerOffsetCommitterOptions;

  constructor(options: ConsumerOffsetCommitterOptions) {
    this.o = options;
  }

  async commit(partition: TopicPartition, offset: number, metadata?: string): Promise<void> {
    const { topic } = partition;
    const member = this.o.membership.current();
    if (!member) {
      throw new SnapshotWriteFencedError(topic, partition.partition, 'offset commit refused: this consumer has not joined the group', {
        reason: 'not-assigned',
      });
    }
    if (!member.assignment[topic]?.includes(partition.partition)) {
      throw new SnapshotWriteFencedError(
        topic,
        partition.partition,
        `offset commit refused: generation ${member.generationId} no longer assigns the partition to member ${member.memberId}`,
        { reason: 'not-assigned' },
      );
    }
    try {
      await this.o.consumer.commitOffsets([{ topic, partition: partition.partition, offset: offsetToKafka(offset), ...(metadata !== undefined ? { metadata } : {}) }]);
    } catch (err) {
      const fence = fenceReason(err);
      if (fence === 'generation' || fence === 'member') {
        throw new SnapshotWriteFencedError(
          topic,
          partition.partition,
          `the group coordinator rejected the offset commit of generation ${member.generationId} (${protocolErrorType(err) ?? fence}); ` +
            'the snapshot writes before it landed and the new owner skips what they cover',
          { cause: err, reason: fence },
        );
      }
      throw err;
    }
  }
}
