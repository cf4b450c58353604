import { type FoldingHandle, type PartitionHost, StaleGenerationError } from '../../activities/partition-host';
import type { FoldLoopRequest, OwnerRequest, PersistResult as WorkflowPersistResult, RecoverRequest, RecoverResult } from '../../activities/types';
import { withheld } from '../../core/redact';
import { offsetText, offsetToKafka } from '../../flow/offsets';
import { BatchFold, hasOutputs } from './batch-fold';
import { BatchHandoff } from './batch-handoff';
import { closeQuietly, type PartitionRecoveries, type Prepared, type RecoveryFigures } from './partition-recoveries';
import { PartitionSlots, type Slot } from './partition-slots';
import { type RuntimeContext, RuntimeSide } from './runtime-side';

/** How long a recovery waits for the persists of the engine it replaces. */
const RETIRE_WAIT_MS = 30_000;

/**
 * A flow's host side in one process: what the partition workflows' activities ask of it (the
 * activities' PartitionHost) — recover a partition, fold it (the fold loop), report its persists —
 * and the owner's timer tick. Each request is checked against the generation the process holds.
 */
export class HostSide extends RuntimeSide implements PartitionHost {
  /** Folds the batches the consumer hands to a partition's fold loop. */
  private readonly folds: BatchFold;
  /** Activities of this process in flight (a graceful stop lets them end before the Temporal workers stop). */
  private activities = 0;
  private activitiesIdle: Array<() => void> = [];

  constructor(
    ctx: RuntimeContext,
    private readonly recoveries: PartitionRecoveries,
  ) {
    super(ctx);
    this.folds = new BatchFold({ ...ctx.options, persists: ctx.persists, log: ctx.options.logger, stopping: () => this.stopping });
  }

  /** Runs one activity's work, counted for a graceful stop. */
  async activity<T>(fn: () => Promise<T>): Promise<T> {
    this.activities++;
    try {
      return await fn();
    } finally {
      this.activities--;
      if (this.activities === 0) for (const resolve of this.activitiesIdle.splice(0)) resolve();
    }
  }

  /** Resolves once no activity of this process runs, or after `timeoutMs`. */
  whenActivitiesIdle(timeoutMs: number): Promise<void> {
    if (this.activities === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.activitiesIdle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private slotFor(r: OwnerRequest): Slot {
    return this.slots.forRequest(r, this.consumer.current());
  }

  async recover(r: RecoverRequest): Promise<RecoverResult> {
    const started = performance.now();
    const slot = this.slotFor(r);
    const tp = [{ topic: r.topic, partitions: [r.partition] }];
    if (PartitionSlots.canKeep(slot, r.keepFromGeneration)) {
      // Same process, next generation, nobody else in between: keep the in-memory state and
      // continue from where this process was, not from the committed offset kafkajs rewound to.
      const flow = slot.flow!;
      slot.flowGeneration = r.owner.generation;
      slot.recovery = r.recovery;
      slot.cadence ??= this.persists.cadenceFor(slot, flow);
      this.consumer.seek({ topic: r.topic, partition: r.partition, offset: offsetToKafka(flow.position) });
      this.consumer.pause(tp);
      this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation }, 'kept in-memory state');
      return { fromMemory: true, keys: flow.liveKeys, snapshotsRead: 0, ms: performance.now() - started, committedOffset: offsetText(flow.committedOffset) };
    }
    const seq = ++slot.recoverSeq;
    const ahead = slot.earlyFold;
    // (slotFor checked the request's generation and member against the slot's: the engine's generation is the join's.)
    if (ahead && !ahead.taken && slot.flow && slot.flowGeneration === r.owner.generation && slot.state === 'running' && slot.flow.failed === undefined) {
      // Recovered at the join and folding since (foldEarly): this activity takes the recovery over
      // as it is — the consumer goes on from where the early loop got to, not from the committed offset.
      ahead.taken = true;
      slot.installedSeq = seq;
      slot.recovery = r.recovery;
      slot.cadence?.stop();
      slot.cadence = this.persists.cadenceFor(slot, slot.flow, true);
      const { keys, snapshotsRead, committedOffset, local } = ahead.result;
      const ms = performance.now() - started;
      const foldingForMs = Math.round(performance.now() - ahead.foldingSince);
      this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation, offset: committedOffset, keys, snapshotsRead, ms: Math.round(ms), phases: ahead.phases, atJoin: { foldingForMs } }, 'recovered');
      return { fromMemory: false, keys, snapshotsRead, ms, committedOffset, ...local };
    }
    await this.retireEngine(slot);
    // Started at the join for this very owner (recoverAtJoin): take it over — unless it failed,
    // then recover afresh as the activity would have.
    const early = this.recoveries.take(slot, r.owner);
    const fromJoin = early ? await early.catch(() => undefined) : undefined;
    const prepared = fromJoin ?? (await this.recoveries.prepare(slot, r.owner));
    const { persistence, flow, assignedAt, phases } = prepared;
    try {
      if ('error' in prepared.outcome) throw prepared.outcome.error;
      if (slot.recoverSeq !== seq) throw new StaleGenerationError(`${r.topic}-${r.partition}: a newer recovery started meanwhile`);
    } catch (err) {
      if (slot.recoverSeq !== seq) await closeQuietly(persistence); // superseded: its producer is not the partition's any more
      throw err;
    }
    const { keys, read, local } = recoveredFigures(prepared, prepared.outcome.keys);
    this.slotFor(r); // still ours after the (possibly long) read
    slot.flow = flow;
    slot.flowGeneration = r.owner.generation;
    slot.installedSeq = seq;
    slot.recovery = r.recovery;
    slot.cadence?.stop();
    slot.cadence = this.persists.cadenceFor(slot, flow, true);
    if (slot.state === 'failed' || slot.state === 'fenced') slot.state = 'assigned';
    this.consumer.seek({ topic: r.topic, partition: r.partition, offset: assignedAt });
    this.consumer.pause(tp);
    const ms = performance.now() - started;
    // Started at the join: how long before this activity it started, and how long the activity waited for it.
    const atJoin = fromJoin ? { startedBeforeMs: Math.round(started - fromJoin.startedAt), waitedMs: Math.round(ms) } : undefined;
    this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation, offset: assignedAt, keys, snapshotsRead: read, ms: Math.round(ms), phases, ...(atJoin ? { atJoin } : {}) }, 'recovered');
    return { fromMemory: false, keys, snapshotsRead: read, ms, committedOffset: assignedAt, ...local };
  }

  /**
   * A recovery started at the join is done before its workflow's recover activity came (at a
   * worker's start the workflow worker is still loading, and every partition's signal, workflow
   * task and activity dispatch queue up on a busy host): its engine is installed and the partition
   * folds from the committed offset at once, under a loop of this process's own, until the
   * workflow's fold loop takes over (recover, then startFolding). Nothing is persisted meanwhile
   * but what a running partition persists without its cadence — a revoke's or stop's flush, an
   * outputs persist when the bound is reached — each fenced by the generation of the join as any
   * persist. If the workflow never comes, the partition counts as not folding for the reassert
   * watchdog (reassertStalled), which signals it again. False: not installed (its activity
   * recovers as before).
   */
  foldEarly(slot: Slot, owner: { generation: number; memberId: string; recoverSeq: number }, prepared: Prepared): boolean {
    if (this.stopping || 'error' in prepared.outcome) return false;
    const current = this.consumer.current();
    if (
      !PartitionSlots.holds(slot, current) ||
      slot.generation !== owner.generation ||
      slot.memberId !== owner.memberId ||
      slot.recoverSeq !== owner.recoverSeq || // a recover activity started since the join
      slot.state !== 'assigned' ||
      slot.flow !== undefined
    ) {
      return false;
    }
    const { flow, assignedAt } = prepared;
    const figures = recoveredFigures(prepared, prepared.outcome.keys);
    slot.flow = flow;
    slot.flowGeneration = owner.generation;
    slot.installedSeq = slot.recoverSeq;
    const r: OwnerRequest = { flow: this.definition.name, topic: slot.topic, partition: slot.partition, owner: { generation: owner.generation, memberId: owner.memberId, taskQueue: this.taskQueue } };
    this.consumer.seek({ topic: slot.topic, partition: slot.partition, offset: assignedAt });
    const folding = this.startFolding(r, false);
    slot.earlyFold = {
      token: folding.token,
      taken: false,
      result: { keys: figures.keys, snapshotsRead: figures.read, committedOffset: assignedAt, local: figures.local },
      phases: prepared.phases,
      foldingSince: performance.now(),
    };
    void this.runEarlyLoop(slot, r, folding);
    return true;
  }

  /** The early fold's loop: folds what the consumer hands over until the workflow's fold loop takes over, or the partition stops here. */
  private async runEarlyLoop(slot: Slot, r: OwnerRequest, folding: FoldingHandle): Promise<void> {
    try {
      for (;;) {
        if (!folding.poll().running) break; // stopped here, or a newer fold loop took over
        await folding.foldNext(EARLY_POLL_MS);
      }
    } catch (err) {
      this.log.warn({ err, topic: slot.topic, partition: slot.partition }, 'early fold loop ended on an error; the workflow recovers the partition');
    } finally {
      if (slot.earlyFold?.token === folding.token && !slot.earlyFold.taken) slot.earlyFold = undefined;
      this.stopFolding(r, folding.token);
    }
  }

  /**
   * A full recovery replaces the slot's engine: the one installed (an older generation's, or this
   * generation's when the workflow recovers again on the same owner after losing track of its fold
   * loop) stops here first — no batch handed to it, no in-process persist started — and what it
   * was persisting lands (or fails) before the new engine reads the store. Under the same
   * generation nothing fences the old engine's writes: landing while the new one reads, they could
   * unlist or overwrite what it has just read.
   */
  private async retireEngine(slot: Slot): Promise<void> {
    const engine = slot.flow;
    if (!engine) return;
    slot.cadence?.stop();
    if (slot.state === 'running') slot.state = 'assigned';
    slot.handoff?.close();
    slot.handoff = undefined;
    this.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]);
    const landed = Promise.allSettled([engine.persistsSettled(), slot.outputsFlush ?? Promise.resolve()]);
    let timer: NodeJS.Timeout | undefined;
    const waited = await Promise.race([landed.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), RETIRE_WAIT_MS)))]);
    clearTimeout(timer);
    if (!waited) this.log.warn({ topic: slot.topic, partition: slot.partition, waitedMs: RETIRE_WAIT_MS }, 'the engine being replaced still persists: recovering anyway');
  }

  recoveryDone(r: FoldLoopRequest): 'done' | 'waiting' | 'ended' {
    const slot = this.slotFor(r);
    if (
      r.afterRecovery !== undefined &&
      slot.recovery === r.afterRecovery &&
      slot.flow !== undefined &&
      slot.flowGeneration === r.owner.generation &&
      slot.installedSeq === slot.recoverSeq // no recovery started since it installed
    ) {
      return 'done';
    }
    // Stopping, and the workflow told (or given up on): it will not start folding here.
    const told = slot.revokeSignalled === r.owner.generation || slot.revokeUnsignalled === r.owner.generation;
    return this.stopping && told ? 'ended' : 'waiting';
  }

  /**
   * Starts processing for one fold-loop activity: the partition's batches are handed to it from
   * now on (FoldingHandle.foldNext). A newer fold loop (after continue-as-new, or a retry of a lost
   * owner) takes over the partition from an older one that has not learned of its cancellation yet.
   */
  startFolding(r: OwnerRequest, workflowLoop = true): FoldingHandle {
    const slot = this.slotFor(r);
    const handle = this.slots.startFolding(slot, r, () => this.stopping);
    slot.handoff ??= new BatchHandoff();
    const handoff = slot.handoff;
    // The workflow's fold loop drives it from now on (an early one, if any, ends at its next look).
    if (workflowLoop) {
      slot.earlyFold = undefined;
      slot.cadence?.start();
    }
    this.consumer.resume([{ topic: r.topic, partitions: [r.partition] }]);
    const mine = () => slot.folding === handle.token && slot.handoff === handoff;
    return {
      ...handle,
      foldNext: async (waitMs, signal) => {
        const held = await handoff.take(waitMs, mine, signal);
        if (!held) return false;
        try {
          await this.folds.fold(slot, held.batch);
          held.done(true);
        } catch (err) {
          held.fail(err);
        }
        return true;
      },
    };
  }

  /** A fold loop ended (cancelled): stop fetching the partition, unless another loop took it over. */
  stopFolding(r: OwnerRequest, token: number): void {
    if (this.slots.stopFolding(r, token)) {
      this.slots.get(r.topic, r.partition)?.cadence?.stop();
      this.consumer.pause([{ topic: r.topic, partitions: [r.partition] }]);
    }
  }

  lastPersistAt(r: OwnerRequest): number | undefined {
    const slot = this.slots.get(r.topic, r.partition);
    return slot && slot.flowGeneration === r.owner.generation ? slot.cadence?.lastPeriodicAt : undefined;
  }

  persistReadiness(r: OwnerRequest): 'persist' | 'skip' | 'wait' {
    return this.slots.persistReadiness(r, this.consumer.current(), this.stopping);
  }

  async persist(r: OwnerRequest): Promise<WorkflowPersistResult> {
    const slot = this.slotFor(r);
    if (slot.state === 'failed') throw slot.failure ?? new Error(`${r.topic}-${r.partition} failed`);
    // Recovered here for this generation but not folding (yet): the workflow starts the fold loop
    // and the first persist together, and on a busy process the persist's delay can run out
    // before the fold loop's activity has started. That is this process's own partition, not a
    // stale one: persist what is due (nothing, usually). Refusing it made the workflow record the
    // partition `fenced` on its only owner, where it stayed (found by bench:outputs).
    const recoveredHere = slot.state === 'assigned' && slot.flowGeneration === r.owner.generation;
    if (!slot.flow || (slot.state !== 'running' && !recoveredHere)) {
      throw new StaleGenerationError(`${r.topic}-${r.partition} is not running here (state ${slot.state})`);
    }
    // The cadence runs in this process (PersistCadence) and alone decides when a persist runs;
    // the workflow's persist reports, after the periodic persist in flight or about to start.
    const due = slot.state === 'running' ? slot.cadence?.due() : undefined;
    if (due) await due;
    const after = slot.state as Slot['state']; // the persist may have stopped the partition
    if (after === 'failed' || after === 'fenced') throw slot.failure ?? new Error(`${r.topic}-${r.partition} ${after}`);
    return this.persists.report(slot);
  }

  /** The owner's tick: its partitions' key timers, and an outputs persist where outputs are due. */
  triggerTimers(): void {
    const outputs = hasOutputs(this.definition);
    for (const slot of this.slots.all()) {
      if (slot.state !== 'running' || !slot.flow) continue;
      try {
        // Also how a partition that failed outside a batch (an async fold, pipelined) is noticed.
        slot.flow.triggerTimers();
      } catch (err) {
        const failure = this.persists.failed(slot, err);
        this.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]);
        this.log.error({ err: withheld(failure), topic: slot.topic, partition: slot.partition }, 'partition failed; its workflow recovers it on this worker after a backoff (phase retrying), unless a newer owner fenced it');
        continue;
      }
      if (outputs && !slot.outputsFlush && !this.stopping && slot.flow.outputsDue()) void this.persists.flushOutputs(slot);
    }
  }
}

/** How often the early fold's loop looks whether it still drives its partition (the workflow's fold loop takes over within this). */
const EARLY_POLL_MS = 100;

/** What a recovery read, as its recover activity reports it: keys, snapshot records read, and with local state where they came from. */
function recoveredFigures(prepared: Prepared, keys: number): { keys: number; read: number; local: Record<string, unknown> } {
  const stats = (prepared.persistence as { lastRecovery?: RecoveryFigures }).lastRecovery;
  // Local state on: where the keys came from (the workflow's status query shows it).
  const local =
    stats?.restore && stats.fromLocal !== undefined
      ? { fromLocal: stats.fromLocal, fromTopic: stats.fromTopic, restore: stats.restore, fullRestoreReason: stats.fullRestoreReason }
      : {};
  return { keys, read: stats?.records ?? keys, local };
}
