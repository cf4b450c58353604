import { offsetToKafka } from '../../flow/offsets';
import type { CommittedPosition } from '../../persistence/offset-committer';
import type { PartitionOwner } from '../../persistence/partition-owner';
import type { WriteGeneration } from '../../persistence/kafka/transactional-snapshot-writer';
import type { TopicPartition } from '../../core/persistence-types';
import { ownershipGeneration } from '../../kafka';
import { protocolErrorType } from '../../kafka/errors';
import type { FlowConsumer } from './flow-consumer';
import { PartitionSlots, type Slot } from './partition-slots';

/**
 * This process as the owner of one partition, for the partition's persistence: built by each
 * recovery for the generation it recovers under. Its committed offset is read from the moment it
 * is built, overlapping the backend's fence: a stable read (require_stable, see
 * FlowConsumer.committedOffset) waits out a transaction still pending on the offset, and no
 * earlier owner can move it after that, its commits carrying a generation the group has left.
 */
export class SlotOwner implements PartitionOwner {
  readonly topic: string;
  readonly partition: number;
  readonly assigned: WriteGeneration;
  private readonly read: Promise<CommittedPosition | undefined>;
  private readDone = false;
  private settled: Promise<CommittedPosition | undefined> | undefined;

  constructor(
    private readonly slot: Slot,
    owner: { generation: number; memberId: string },
    readonly groupId: string,
    private readonly consumer: FlowConsumer,
    /** The group's timeouts (the flow's consumer settings): they bound the wait for a join (joinWaitMs). */
    private readonly timeouts: { readonly rebalanceTimeoutMs: number; readonly sessionTimeoutMs: number },
  ) {
    this.topic = slot.topic;
    this.partition = slot.partition;
    this.assigned = { generationId: owner.generation, memberId: owner.memberId };
    this.read = consumer.committedPosition(slot.topic, slot.partition);
    this.read.then(
      () => (this.readDone = true),
      () => (this.readDone = true), // awaited by committedOffset, unless the backend fails first
    );
  }

  /**
   * The generation a commit goes under: the member's current one while it holds the partition
   * since the generation the engine's state belongs to (the same join, or — cooperative — an
   * earlier one the partition was kept through); else that generation, which the group refuses.
   */
  generation(): WriteGeneration {
    const owned = this.slot.flowGeneration ?? this.assigned.generationId;
    const current = this.consumer.current();
    if (current && current.memberId === this.slot.memberId && ownershipGeneration(current, this.topic, this.partition) === owned) {
      return { generationId: current.generationId, memberId: current.memberId };
    }
    return { generationId: owned, memberId: this.slot.memberId };
  }

  /**
   * Cooperative rebalancing only (an eager member rejoins after its revoke point, so a refused
   * generation means it is out): waits for the group's join after `used` and answers its
   * generation if the partition is still held here under the same ownership.
   */
  async nextGeneration(used: WriteGeneration): Promise<WriteGeneration | undefined> {
    if (!this.consumer.current()?.cooperative) return undefined;
    const next = await this.consumer.joinAfter(used.generationId, this.joinWaitMs());
    if (!next) return undefined;
    const g = this.generation();
    return g.generationId > used.generationId ? g : undefined;
  }

  /**
   * How long a commit the group refused waits for the group's next join: at most the session
   * timeout. The commit may be waited on inside the consumer's batch callback (a fold waiting for
   * room for its outputs), where the member sends no heartbeat, learns of no rebalance and cannot
   * rejoin: no join comes, and past the session timeout the group has dropped the member anyway.
   * Waiting the rebalance timeout (60 s by default) there stalled every partition of two workers
   * for 60 s in a chaos run (docs/experiments/2026-12-06-chaos-469dec2-kafka-local-stall.md).
   */
  joinWaitMs(): number {
    return Math.min(this.timeouts.rebalanceTimeoutMs, this.timeouts.sessionTimeoutMs);
  }

  /**
   * kafkajs commits with the member's live generation, which the broker accepts even when the new
   * generation gave this partition to someone else: check that this process still holds it first.
   * Cooperative: a commit the group refuses because it is rebalancing (or has just moved to a new
   * generation) is made again after the join, if the partition stayed here.
   */
  async commit(_partition: TopicPartition, offset: number, metadata?: string): Promise<void> {
    for (;;) {
      PartitionSlots.assertHolds(this.slot, this.consumer.current());
      const used = this.consumer.current()!.generationId;
      try {
        await this.consumer.commitOffsets([{ topic: this.topic, partition: this.partition, offset: offsetToKafka(offset), ...(metadata !== undefined ? { metadata } : {}) }]);
        return;
      } catch (err) {
        const type = protocolErrorType(err);
        if (type !== 'REBALANCE_IN_PROGRESS' && type !== 'ILLEGAL_GENERATION') throw err;
        if (!(await this.nextGeneration({ generationId: used, memberId: this.slot.memberId }))) throw err;
      }
    }
  }

  /**
   * The read started at construction — or, if it is still waiting once the backend has fenced
   * (most likely on a transaction a dead owner left open, which the fence has just aborted), the
   * first of it and a read started now, which answers at once rather than after the read's backoff.
   */
  async committedOffset(): Promise<string | undefined> {
    return (await this.committed())?.offset;
  }

  /** The same read, with the metadata committed with the offset. */
  committed(): Promise<CommittedPosition | undefined> {
    if (!this.settled) {
      this.settled = this.read;
      if (!this.readDone) {
        const again = this.consumer.committedPosition(this.topic, this.partition);
        again.catch(() => undefined);
        this.settled = Promise.race([this.read, again]);
      }
    }
    return this.settled;
  }
}
