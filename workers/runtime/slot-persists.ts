import type { PersistResult as WorkflowPersistResult } from '../../activities/types';
import { ProducerEpochLostError, SnapshotWriteConflictError, SnapshotWriteFencedError } from '../../core/fence-errors';
import type { Logger } from '../../core/logger';
import type { FlowDefinition } from '../../define-flow';
import { offsetText } from '../../flow/offsets';
import type { PersistReason } from '../../flow/partition-flow';
import type { FlowConsumer } from './flow-consumer';
import { PartitionSlots, type Slot, type Unreported } from './partition-slots';
import { PersistCadence } from './persist-cadence';
import { traced } from '../../core/tracing';

export interface SlotPersistsOptions {
  readonly definition: FlowDefinition<unknown, unknown>;
  /** The flow's group consumer: the generation it holds now, and pausing a partition that stopped. */
  readonly consumer: FlowConsumer;
  readonly log: Logger;
  /** The process is stopping (no in-process persist starts then). */
  readonly stopping: () => boolean;
}

/**
 * The persists of the partitions a process holds, as FlowRuntime runs them: one persist of a
 * slot's engine (a fence or failure stops the slot here), the in-process ones (the cadence's
 * periodic and idle persists, the `outputs` flush) and when they may run, and what they landed
 * that the workflow has not been told yet (with its next persist's report).
 */
export class SlotPersists {
  constructor(private readonly o: SlotPersistsOptions) {}

  /**
   * outputEvery (and maxPendingOutputs): persists the keys with pending outputs (emitted records,
   * dead letters) through the partition's serialized persist chain — like the flush on revoke, in
   * this process and not as a workflow activity, so the workflow history does not grow with the
   * output rate. The generation fence and the transaction protect it as any persist; a failure
   * stops the partition here like a failed periodic persist (the fold loop reports it and the
   * workflow retries). One at a time per partition: a caller while one runs gets that one.
   * Never rejects.
   */
  flushOutputs(slot: Slot): Promise<void> {
    slot.outputsFlush ??= this.persistOutputs(slot).finally(() => {
      slot.outputsFlush = undefined;
    });
    return slot.outputsFlush;
  }

  private async persistOutputs(slot: Slot): Promise<void> {
    if (!this.mayPersistHere(slot, slot.flow)) return;
    try {
      noteUnreported(slot, await this.persist(slot, 'outputs', { timersTriggered: true }));
    } catch (err) {
      this.o.log.warn({ err, topic: slot.topic, partition: slot.partition }, 'outputs persist failed; the partition stopped here');
    }
  }

  /**
   * The partition's engine `flow` may be persisted by this process now, on its own initiative (an
   * in-process persist: outputs, periodic, idle): a fold loop drives it, under the generation the
   * process holds it in and its state belongs to, and the process is not stopping.
   */
  mayPersistHere(slot: Slot, flow: Slot['flow']): boolean {
    const current = this.o.consumer.current();
    return (
      slot.state === 'running' &&
      flow !== undefined &&
      slot.flow === flow &&
      flow.failed === undefined &&
      !this.o.stopping() &&
      PartitionSlots.holds(slot, current) &&
      slot.flowGeneration === slot.generation
    );
  }

  /**
   * The persist cadence of a newly installed engine (persistEvery and the idle flush, in this
   * process). `recovered`: the engine was just read from the store — its first batch is committed
   * at once (a `takeover` persist), unless the flow keeps kafka-flow's cadence exactly (`idleFlush: false`).
   */
  cadenceFor(slot: Slot, flow: NonNullable<Slot['flow']>, recovered = false): PersistCadence {
    const idleAfterMs = this.o.definition.idleFlushMs;
    return new PersistCadence({
      everyMs: this.o.definition.timers.persistEvery ?? 60_000,
      idleAfterMs,
      commitFirstBatch: recovered && idleAfterMs !== undefined,
      mayPersist: () => this.mayPersistHere(slot, flow),
      persist: async (reason, now) => {
        try {
          noteUnreported(slot, await this.persist(slot, reason, { now }));
        } catch (err) {
          this.o.log.warn({ err, topic: slot.topic, partition: slot.partition, reason }, 'persist failed; the partition stopped here');
        }
      },
    });
  }

  /** What the in-process persists did since the workflow was last told, and where the partition stands. */
  report(slot: Slot): WorkflowPersistResult {
    const flow = slot.flow!;
    const u = slot.unreported;
    slot.unreported = undefined;
    return resultOf(slot, flow, {
      persistedKeys: u?.persistedKeys ?? 0,
      deletedKeys: u?.deletedKeys ?? 0,
      deadLetters: u?.deadLetters ?? 0,
      outputs: u?.outputs ?? 0,
      ms: u?.ms ?? 0,
    });
  }

  /**
   * One persist of the slot's engine. `timersTriggered`: the caller ran the key timers just now
   * (the tick that found outputs due); `now`: the persist's clock (the cadence's).
   */
  persist(slot: Slot, reason: PersistReason, options: { timersTriggered?: boolean; now?: number } = {}): Promise<WorkflowPersistResult> {
    // One span per persist (tracing on); its transactions are its children.
    const fields = { flow: this.o.definition.name, topic: slot.topic, partition: slot.partition, generation: slot.flowGeneration, reason };
    return traced('kafka-flow.persist', fields, async (span) => {
      const r = await this.persistNow(slot, reason, options);
      span?.set({ keys: r.persistedKeys, deletedKeys: r.deletedKeys, outputs: r.outputs ?? 0, deadLetters: r.deadLetters ?? 0, offset: r.committedOffset });
      return r;
    });
  }

  private async persistNow(slot: Slot, reason: PersistReason, options: { timersTriggered?: boolean; now?: number }): Promise<WorkflowPersistResult> {
    const flow = slot.flow!;
    const started = performance.now();
    const now = options.now ?? Date.now();
    if (!options.timersTriggered) flow.triggerTimers(now);
    let result: Awaited<ReturnType<typeof flow.persist>>;
    try {
      result = await flow.persist(now, reason);
    } catch (caught) {
      throw this.stopSlot(slot, caught);
    }
    if (result.failed > 0) {
      // Revoke and shutdown persists report failed writes instead of throwing: those keys keep
      // holding their offsets, so the next owner replays them.
      this.o.log.warn({ topic: slot.topic, partition: slot.partition, reason, failed: result.failed }, 'some keys were not persisted');
    }
    if (result.fenced) {
      // Fenced (a newer producer or generation), or a write refused (another owner's newer state).
      const fence = flow.failed instanceof SnapshotWriteFencedError || flow.failed instanceof SnapshotWriteConflictError ? flow.failed : undefined;
      throw this.stopSlot(slot, fence ?? new SnapshotWriteFencedError(slot.topic, slot.partition, 'the persist was fenced'));
    }
    this.o.log.debug(
      { topic: slot.topic, partition: slot.partition, generation: slot.flowGeneration, reason, written: result.written, committed: offsetText(flow.committedOffset), ms: Math.round(performance.now() - started) },
      'persisted',
    );
    return resultOf(slot, flow, {
      persistedKeys: result.written,
      deletedKeys: result.deleted ?? 0,
      deadLetters: result.deadLetters ?? 0,
      outputs: result.outputs ?? 0,
      ms: performance.now() - started,
    });
  }

  /**
   * The engine's failure met outside a persist (a batch or a timer): the partition is `failed`
   * here. A failure a persist already recorded stays — the engine rethrows that same error
   * unclassified, and a lost producer epoch must stay a failure to retry, not become a fence that
   * waits for a newer owner who never comes; otherwise it is classified as a persist's would be.
   */
  failed(slot: Slot, caught: unknown): unknown {
    const recorded = (slot.state === 'failed' || slot.state === 'fenced') && slot.failure !== undefined;
    slot.failure = recorded ? slot.failure : this.classify(slot, caught);
    slot.state = 'failed';
    return slot.failure;
  }

  /** A persist stopped the partition here: `fenced` or `failed`, paused; returns the error to throw. */
  private stopSlot(slot: Slot, caught: unknown): unknown {
    const err = this.classify(slot, caught);
    slot.state = err instanceof SnapshotWriteFencedError || err instanceof SnapshotWriteConflictError ? 'fenced' : 'failed';
    slot.failure = err;
    this.o.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]);
    return err;
  }

  /**
   * A producer-epoch fence is a fence only when a newer owner exists. While the group's current
   * generation still gives the partition to this process, it is an aborted transaction (a
   * transaction timeout, or an earlier producer of ours re-initialized): the workflow retries.
   */
  private classify(slot: Slot, err: unknown): unknown {
    if (!(err instanceof SnapshotWriteFencedError) || err.reason !== 'producer-epoch') return err;
    const current = this.o.consumer.current();
    const stillOurs =
      !this.o.stopping() &&
      PartitionSlots.holds(slot, current) &&
      (current!.assignment[slot.topic] ?? []).includes(slot.partition);
    return stillOurs ? new ProducerEpochLostError(slot.topic, slot.partition, err) : err;
  }
}

/** An in-process persist's result, kept for the workflow's next persist (which reports it). */
function noteUnreported(slot: Slot, r: WorkflowPersistResult): void {
  const u: Unreported = slot.unreported ?? { persistedKeys: 0, deletedKeys: 0, outputs: 0, deadLetters: 0, ms: 0 };
  u.persistedKeys += r.persistedKeys;
  u.deletedKeys += r.deletedKeys;
  u.outputs += r.outputs ?? 0;
  u.deadLetters += r.deadLetters ?? 0;
  u.ms += r.ms;
  slot.unreported = u;
}

/** A persist's result with what the in-process persists landed since the workflow was last told. */
export function withUnreported(slot: Slot, r: WorkflowPersistResult): WorkflowPersistResult {
  const u = slot.unreported;
  if (!u) return r;
  slot.unreported = undefined;
  return {
    ...r,
    persistedKeys: r.persistedKeys + u.persistedKeys,
    deletedKeys: r.deletedKeys + u.deletedKeys,
    outputs: (r.outputs ?? 0) + u.outputs || undefined,
    deadLetters: (r.deadLetters ?? 0) + u.deadLetters || undefined,
  };
}

/** A persist report: what landed (`counts`) and where the partition stands now. */
function resultOf(slot: Slot, flow: NonNullable<Slot['flow']>, counts: Unreported): WorkflowPersistResult {
  const hw = slot.highWatermark;
  return {
    persistedKeys: counts.persistedKeys,
    deletedKeys: counts.deletedKeys,
    deadLetters: counts.deadLetters || undefined,
    outputs: counts.outputs || undefined,
    committedOffset: offsetText(flow.committedOffset),
    liveKeys: flow.liveKeys,
    logEndOffset: hw === undefined ? undefined : offsetText(hw),
    lag: hw !== undefined ? Math.max(0, hw - flow.position) : undefined,
    ms: counts.ms,
    at: Date.now(),
  };
}
