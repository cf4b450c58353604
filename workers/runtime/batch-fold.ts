import type { EachBatchPayload } from 'kafkajs';
import type { Logger } from '../../core/logger';
import { withheld } from '../../core/redact';
import type { FlowDefinition } from '../../define-flow';
import type { FlowMetrics } from '../../flow/metrics';
import { logEndFromKafka } from '../../flow/offsets';
import type { FlowConsumer } from './flow-consumer';
import { PartitionSlots, type Slot } from './partition-slots';
import type { SlotPersists } from './slot-persists';

export interface BatchFoldOptions {
  readonly definition: FlowDefinition<unknown, unknown>;
  readonly consumer: FlowConsumer;
  readonly persists: SlotPersists;
  readonly metrics: FlowMetrics;
  readonly log: Logger;
  /** The process is stopping (no outputs persist starts then). */
  readonly stopping: () => boolean;
}

/**
 * Records folded between two yields to the event loop (≈ 5–10 ms of work): a persist in flight
 * during folding took 1.6–1.9 s for 7 transactions without slices, ≈ 0.6 s with (measured).
 */
const SLICE = 2_000;

/**
 * Folds one fetched batch of a partition into its engine, as the partition's fold-loop activity
 * does with each batch the consumer hands it: in slices, making room for outputs first when the
 * partition holds as many as it may (maxPendingOutputs), starting an outputs persist once half the
 * bound is held, and telling the persist cadence how far the fold got. A fold failure stops the
 * partition here (its fold loop reports it); the batch is paused where it stopped.
 */
export class BatchFold {
  constructor(private readonly o: BatchFoldOptions) {}

  async fold(slot: Slot, { batch, resolveOffset, pause, heartbeat }: EachBatchPayload): Promise<void> {
    const current = this.o.consumer.current();
    const flow = slot.flow;
    if (slot.state !== 'running' || !flow || !PartitionSlots.holds(slot, current)) {
      pause(); // not (or no longer) ours to process: nothing resolved, so nothing is skipped
      return;
    }
    const highWatermark = logEndFromKafka(batch.highWatermark);
    slot.highWatermark = highWatermark;
    const messages = batch.messages;
    const emits = hasOutputs(this.o.definition);
    /** The last offset folded (what kafkajs may take as processed if the batch stops part way). */
    let folded: string | undefined;
    // In slices, yielding between them: the persist in flight (a transaction's requests and
    // answers) and the Temporal workers' callbacks run between slices, not after the whole batch.
    for (let from = 0; from < messages.length; from += SLICE) {
      if (from > 0) await new Promise((resolve) => setImmediate(resolve));
      if (slot.state !== 'running' || slot.flow !== flow) {
        // Revoked meanwhile (a cooperative rebalance goes on fetching): the rest is not ours to fold.
        if (folded !== undefined) resolveOffset(folded);
        pause();
        return;
      }
      if (flow.outputsFull()) {
        if (folded !== undefined) resolveOffset(folded);
        const waitStarted = performance.now();
        const mayFold = await this.roomForOutputs(slot, flow, heartbeat);
        this.o.metrics.outputsWait.labels({ flow: this.o.definition.name, topic: slot.topic, partition: String(slot.partition) }).inc((performance.now() - waitStarted) / 1000);
        if (!mayFold) {
          pause(); // revoked, stopping, or stopped by that persist: the rest of the batch is not ours to fold
          return;
        }
      }
      const slice = from === 0 && messages.length <= SLICE ? messages : messages.slice(from, from + SLICE);
      try {
        const r = flow.handleBatch(slice);
        if (r) await r;
      } catch (err) {
        const failure = this.o.persists.failed(slot, err);
        pause();
        this.o.log.error({ err: withheld(failure), topic: batch.topic, partition: batch.partition }, 'partition failed; its workflow recovers it on this worker after a backoff (phase retrying), unless a newer owner fenced it');
        return;
      }
      folded = slice[slice.length - 1]?.offset;
      // Half the bound held: an outputs persist starts now, while the batch folds on (see outputsDue).
      if (emits && !slot.outputsFlush && !this.o.stopping() && flow.outputsDue()) void this.o.persists.flushOutputs(slot);
    }
    if (folded !== undefined) resolveOffset(folded);
    slot.cadence?.folded(flow.position, highWatermark, messages[messages.length - 1]?.timestamp);
    await heartbeat();
    // kafkajs hands the batches of one fetch over back to back in microtasks: yield after each, so
    // the Temporal workers' callbacks (the persist activity's timer, its start and completion) run
    // between batches instead of after the whole fetch.
    await new Promise((resolve) => setImmediate(resolve));
  }

  /**
   * maxPendingOutputs: the partition holds as many outputs not landed yet as it may. Runs an
   * `outputs` persist at once (or waits for the one running) and returns once it made room, so
   * the batch folds nothing more meanwhile. Still full after a persist that landed nothing (its
   * writes failed under ignorePersistErrors): tries again after a short wait, heartbeating (a
   * rebalance meanwhile makes the heartbeat throw, and kafkajs rejoins). False: the partition is
   * not to be folded here any more — revoked, the process stopping, or stopped by that persist
   * (a failed persist fails the partition as any outputs persist does).
   */
  private async roomForOutputs(slot: Slot, flow: NonNullable<Slot['flow']>, heartbeat: () => Promise<void>): Promise<boolean> {
    const mayFold = () =>
      slot.state === 'running' && slot.flow === flow && flow.failed === undefined && !this.o.stopping() && PartitionSlots.holds(slot, this.o.consumer.current());
    while (flow.outputsFull()) {
      if (!mayFold()) return false;
      await this.o.persists.flushOutputs(slot);
      if (!mayFold()) return false;
      if (!flow.outputsFull()) break;
      await heartbeat();
      await new Promise((resolve) => setTimeout(resolve, Math.min(this.o.definition.outputEveryMs, 1000)));
    }
    return true;
  }
}

/**
 * The flow can have outputs pending on its keys: records its fold emits (`outputTopics`) or
 * dead letters (a `dead-letter` policy). Both ride with their key's next write and both make the
 * key due within `outputEvery` (flow/partition-flow.ts `outputsDue`).
 */
export function hasOutputs(definition: Pick<FlowDefinition<unknown, unknown>, 'outputTopics' | 'deadLetterTopics'>): boolean {
  return definition.outputTopics.length > 0 || definition.deadLetterTopics !== undefined;
}
