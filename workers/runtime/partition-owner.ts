import { offsetToKafka } from '../../flow/offsets';
import type { PartitionOwner } from '../../persistence/partition-owner';
import type { WriteGeneration } from '../../persistence/kafka/transactional-snapshot-writer';
import type { TopicPartition } from '../../core/persistence-types';
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
  private readonly read: Promise<string | undefined>;
  private readDone = false;
  private settled: Promise<string | undefined> | undefined;

  constructor(
    private readonly slot: Slot,
    owner: { generation: number; memberId: string },
    readonly groupId: string,
    private readonly consumer: FlowConsumer,
  ) {
    this.topic = slot.topic;
    this.partition = slot.partition;
    this.assigned = { generationId: owner.generation, memberId: owner.memberId };
    this.read = consumer.committedOffset(slot.topic, slot.partition);
    this.read.then(
      () => (this.readDone = true),
      () => (this.readDone = true), // awaited by committedOffset, unless the backend fails first
    );
  }

  /** The generation the engine's state belongs to now (a later one when the partition came back here and kept its state). */
  generation(): WriteGeneration {
    return { generationId: this.slot.flowGeneration ?? this.assigned.generationId, memberId: this.slot.memberId };
  }

  /**
   * kafkajs commits with the member's live generation, which the broker accepts even when the new
   * generation gave this partition to someone else: check that this process still holds it first.
   */
  async commit(_partition: TopicPartition, offset: number): Promise<void> {
    PartitionSlots.assertHolds(this.slot, this.consumer.current());
    await this.consumer.commitOffsets([{ topic: this.topic, partition: this.partition, offset: offsetToKafka(offset) }]);
  }

  /**
   * The read started at construction — or, if it is still waiting once the backend has fenced
   * (most likely on a transaction a dead owner left open, which the fence has just aborted), the
   * first of it and a read started now, which answers at once rather than after the read's backoff.
   */
  committedOffset(): Promise<string | undefined> {
    if (!this.settled) {
      this.settled = this.read;
      if (!this.readDone) {
        const again = this.consumer.committedOffset(this.topic, this.partition);
        again.catch(() => undefined);
        this.settled = Promise.race([this.read, again]);
      }
    }
    return this.settled;
  }
}
