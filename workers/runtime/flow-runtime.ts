import type { EachBatchPayload } from 'kafkajs';
import { type FoldingHandle, type PartitionHost, StaleGenerationError } from '../../activities/partition-host';
import type { FoldLoopRequest, OwnerRequest, PersistResult as WorkflowPersistResult, RecoverRequest, RecoverResult } from '../../activities/types';
import { createPartitionFlow } from '../../flow/create-partition-flow';
import type { PartitionFlow } from '../../flow/partition-flow';
import type { FlowDefinition } from '../../define-flow';
import type { Logger } from '../../core/logger';
import { withheld } from '../../core/redact';
import type { FlowMetrics } from '../../flow/metrics';
import { offsetText, offsetToKafka } from '../../flow/offsets';
import type { GroupGeneration, RevokedPartitions } from '../../kafka';
import type { PartitionPersistence } from '../../flow/ports';
import type { PersistenceBackend } from '../../persistence/backends';
import type { FlowConsumer } from './flow-consumer';
import type { PartitionSignals } from './partition-signals';
import { PartitionSlots, type Slot } from './partition-slots';
import { SlotPersists, withUnreported } from './slot-persists';
import { BatchFold, hasOutputs } from './batch-fold';
import { BatchHandoff } from './batch-handoff';

export { StaleGenerationError } from '../../activities/partition-host';
export { hasOutputs } from './batch-fold';

export interface FlowRuntimeOptions {
  definition: FlowDefinition<unknown, unknown>;
  /** The flow's group consumer (KafkaFlowConsumer in a worker). */
  consumer: FlowConsumer;
  /** Tells the partition workflows about assignments and revokes (TemporalPartitionSignals in a worker). */
  signals: PartitionSignals;
  /** This process's own activity task queue. */
  taskQueue: string;
  backend: PersistenceBackend<unknown, unknown>;
  metrics: FlowMetrics;
  logger: Logger;
  /** Continue-as-new threshold passed to new partition workflows (KFT_MAX_HISTORY_EVENTS). */
  maxHistoryEvents?: number;
  /** The least time between a partition workflow's persist reports, passed to new partition workflows (KFT_WORKFLOW_REPORT_EVERY_MS). */
  workflowReportEveryMs?: number;
  /**
   * A partition held here but not folding for this long has its assignment signalled again
   * (KFT_REASSERT_AFTER_MS, default 30 s): a live workflow ignores the repeat; a closed one (failed
   * on a nondeterminism error, terminated by an operator) is started afresh and recovers it.
   */
  reassertAfterMs?: number;
  /**
   * Start recovering a newly assigned partition at the join, while its workflow is signalled and
   * schedules the recovery (default true): the recover activity of that generation takes the
   * recovery over (see recover). False: every recovery starts with its activity.
   */
  recoverAtJoin?: boolean;
}

/** A recovery's work before it installs its engine in the slot: fenced, committed offset read, state read. */
interface Prepared {
  persistence: PartitionPersistence<unknown, unknown>;
  flow: PartitionFlow<unknown, unknown>;
  assignedAt: string;
  /** flow.recover()'s outcome: the keys read, or its failure. */
  outcome: { keys: number } | { error: unknown };
  phases: { persistence: number; committed: number; read: number };
  startedAt: number;
}

/** A recovery started at the join, for the workflow's recover activity of that generation to take over. */
interface EarlyRecovery {
  generation: number;
  memberId: string;
  prepared: Promise<Prepared>;
}

/** What a persistence's `lastRecovery` may report (the Kafka backend's RecoveryStats). */
type RecoveryFigures = Partial<Pick<RecoverResult, 'fromLocal' | 'fromTopic' | 'restore' | 'fullRestoreReason'>> & { records?: number };

async function closeQuietly(p: PartitionPersistence<unknown, unknown>): Promise<void> {
  try {
    await p.close?.();
  } catch {
    // its producer may already be closed by the newer recovery's backend call
  }
}

/**
 * A flow in one worker process: its group consumer, the partitions it owns (PartitionSlots), their
 * engines. Partition workflows drive recovery, folding and persistence through the activities,
 * which call into this object (the activities' PartitionHost): the consumer hands each batch to
 * its partition's fold-loop activity, which folds it (BatchFold). What a persist of a partition
 * does here — the in-process cadence and outputs flush, fences, reports — is SlotPersists.
 */
export class FlowRuntime implements PartitionHost {
  readonly definition: FlowDefinition<unknown, unknown>;
  readonly taskQueue: string;
  private readonly o: FlowRuntimeOptions;
  private readonly consumer: FlowConsumer;
  private readonly slots = new PartitionSlots();
  private readonly log: Logger;
  /** One persist of a partition's engine, the in-process persists, and what the workflow is not told yet. */
  private readonly persists: SlotPersists;
  /** Folds the batches the consumer hands to a partition's fold loop. */
  private readonly folds: BatchFold;
  private timers?: NodeJS.Timeout;
  private watchdog?: NodeJS.Timeout;
  private stopping = false;
  /** Activities of this process in flight (a graceful stop lets them end before the Temporal workers stop). */
  private activities = 0;
  private activitiesIdle: Array<() => void> = [];
  /** Recoveries started at a join (recoverAtJoin), by slot, until their recover activity takes them or they are dropped. */
  private readonly early = new Map<Slot, EarlyRecovery>();

  constructor(options: FlowRuntimeOptions) {
    this.o = options;
    this.definition = options.definition;
    this.taskQueue = options.taskQueue;
    this.log = options.logger;
    this.consumer = options.consumer;
    this.persists = new SlotPersists({ definition: options.definition, consumer: options.consumer, log: options.logger, stopping: () => this.stopping });
    this.folds = new BatchFold({ ...options, persists: this.persists, log: options.logger, stopping: () => this.stopping });
  }

  async start(): Promise<void> {
    await this.consumer.start({
      onJoin: (g) => this.onJoin(g),
      onRevoke: (revoked) => this.onRevoke(revoked),
      eachBatch: (payload) => this.eachBatch(payload),
    });
    this.timers = setInterval(() => this.triggerTimers(), timerTickMs(this.definition));
    const reassertAfterMs = this.o.reassertAfterMs ?? 30_000;
    this.watchdog = setInterval(() => this.reassertStalled(reassertAfterMs), Math.max(250, Math.min(reassertAfterMs / 2, 5_000)));
  }

  /**
   * The orchestration's own self-healing: a partition this process holds (current generation)
   * whose fold loop has not run for `afterMs` gets its assignment signalled again. Nothing changes
   * for a workflow that is alive (it ignores an assignment it has); one that closed (failed on a
   * nondeterminism error, or was terminated) is started afresh by the signal and recovers the
   * partition here from its persisted state.
   */
  private reassertStalled(afterMs: number): void {
    const current = this.consumer.current();
    if (!current || this.stopping) return;
    const now = Date.now();
    const stalled: Array<{ topic: string; partition: number }> = [];
    for (const slot of this.slots.all()) {
      if (slot.generation !== current.generationId || slot.state === 'running' || slot.state === 'revoked') {
        slot.notFoldingSince = undefined;
        continue;
      }
      slot.notFoldingSince ??= now;
      if (now - slot.notFoldingSince < afterMs) continue;
      slot.notFoldingSince = now; // again after another afterMs, not at every tick
      stalled.push({ topic: slot.topic, partition: slot.partition });
    }
    if (stalled.length === 0) return;
    this.log.warn({ partitions: stalled.map((p) => `${p.topic}-${p.partition}`), afterMs }, 'partitions held here but not folding: signalling their assignment again');
    const assignment: Record<string, number[]> = {};
    for (const p of stalled) assignment[p.topic] = [...(assignment[p.topic] ?? []), p.partition];
    void this.signalAssignments({ ...current, assignment }).catch((err) => this.log.warn({ err }, 'could not signal the assignment again'));
  }

  /**
   * Flushes (on revoke) and leaves the group; the revoke point runs before the member leaves. Then
   * waits (up to `activitiesGraceMs`) for this process's activities to end by themselves — their
   * partitions are revoked and signalled — so that stopping the Temporal workers leaves no activity
   * to time out in the partition workflows' histories.
   */
  async stop(activitiesGraceMs = 5000): Promise<void> {
    this.stopping = true;
    if (this.timers) clearInterval(this.timers);
    if (this.watchdog) clearInterval(this.watchdog);
    for (const slot of this.slots.all()) slot.cadence?.stop();
    for (const slot of [...this.early.keys()]) this.dropEarly(slot);
    await this.consumer.stop();
    await this.whenActivitiesIdle(activitiesGraceMs);
    await this.consumer.close();
    await this.o.backend.close();
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

  private whenActivitiesIdle(timeoutMs: number): Promise<void> {
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

  // ---- consumer side -------------------------------------------------------------------------

  private onJoin(g: GroupGeneration): void {
    // Synchronous: runs before the consumer fetches under the new generation, so every assigned
    // partition is paused until its workflow has recovered it here.
    for (const [topic, partitions] of Object.entries(g.assignment)) {
      if (partitions.length > 0) this.consumer.pause([{ topic, partitions }]);
    }
    for (const slot of this.slots.join(g)) {
      // revoked for good: its state and producer go
      this.dropEarly(slot);
      slot.cadence?.stop();
      void this.o.backend.release?.({ topic: slot.topic, partition: slot.partition }).catch((err) => this.log.warn({ err }, 'release failed'));
    }
    this.log.info(
      { generation: g.generationId, memberId: g.memberId, assignment: g.assignment },
      'partitions assigned',
    );
    void this.signalAssignments(g).catch((err) => this.log.error({ err }, 'could not signal the partition workflows'));
    if (this.o.recoverAtJoin !== false) this.recoverAtJoin(g);
  }

  /**
   * A partition new to this process (no engine here) starts recovering now — fenced, its committed
   * offset and persisted state read — while its workflow is signalled, takes its workflow task and
   * schedules the recovery: at a worker's start the workflow worker is still loading then, so the
   * recovery is done by the time its activity comes, which takes it over (recover). The fence before
   * any read and the generation are those of the join, the same as the activity's; nothing is
   * folded before the workflow's fold loop starts. A partition whose engine is here (the next
   * generation may keep it) waits for its activity, as does one fenced or failed here.
   */
  private recoverAtJoin(g: GroupGeneration): void {
    if (this.stopping) return;
    for (const [topic, partitions] of Object.entries(g.assignment)) {
      for (const partition of partitions) {
        const slot = this.slots.get(topic, partition);
        if (!slot || slot.flow !== undefined || slot.state !== 'assigned') continue;
        this.dropEarly(slot);
        const prepared = this.prepareRecovery(slot, { generation: g.generationId, memberId: g.memberId });
        prepared.catch((err) => this.log.debug({ err, topic, partition }, 'the recovery started at the join failed; its activity recovers afresh'));
        this.early.set(slot, { generation: g.generationId, memberId: g.memberId, prepared });
      }
    }
  }

  /** Drops a recovery started at a join that no activity took over (its producer closed once it is done). */
  private dropEarly(slot: Slot): void {
    const early = this.early.get(slot);
    if (!early) return;
    this.early.delete(slot);
    void early.prepared.then((p) => closeQuietly(p.persistence), () => undefined);
  }

  /** The recovery started at the join for this owner, taken over (once); a stale one is dropped. */
  private takeEarly(slot: Slot, owner: { generation: number; memberId: string }): Promise<Prepared> | undefined {
    const early = this.early.get(slot);
    if (!early) return undefined;
    if (early.generation !== owner.generation || early.memberId !== owner.memberId) {
      this.dropEarly(slot);
      return undefined;
    }
    this.early.delete(slot);
    return early.prepared;
  }

  private async signalAssignments(g: GroupGeneration): Promise<void> {
    const persistEveryMs = this.definition.timers.persistEvery ?? 60_000;
    const { maxHistoryEvents, workflowReportEveryMs } = this.o;
    const limits = {
      ...(maxHistoryEvents ? { maxHistoryEvents } : {}),
      ...(workflowReportEveryMs ? { reportEveryMinMs: workflowReportEveryMs } : {}),
    };
    await Promise.all(
      Object.entries(g.assignment).flatMap(([topic, partitions]) =>
        partitions.map(async (partition) => {
          const ref = { flow: this.definition.name, topic, partition };
          await this.withRetry(`signal assignment of ${topic}-${partition}`, () =>
            this.o.signals.assigned(
              { ...ref, persistEveryMs, limits: Object.keys(limits).length > 0 ? limits : undefined },
              { generation: g.generationId, memberId: g.memberId, taskQueue: this.taskQueue, foldAwaitsRecovery: true },
            ),
          );
        }),
      ),
    );
  }

  /**
   * A fetched batch goes to the partition's fold-loop activity, which folds it (BatchFold); the
   * callback returns once it is folded, so kafkajs goes on as if it had folded it itself.
   */
  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    const slot = this.slots.get(payload.batch.topic, payload.batch.partition);
    const handoff = slot?.state === 'running' ? slot.handoff : undefined;
    if (!handoff || !(await handoff.hand(payload))) payload.pause(); // no fold loop (any more): nothing resolved, nothing skipped
  }

  private triggerTimers(): void {
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

  /** The awaited revoke point: in-flight batches are done; flush under the generation being given up. */
  private async onRevoke(revoked: RevokedPartitions): Promise<void> {
    const reason = revoked.reason === 'leave' ? 'shutdown' : 'revoke';
    await Promise.all(
      revoked.assignment.flatMap(({ topic, partitions }) =>
        partitions.map(async (partition) => {
          const slot = this.slots.get(topic, partition);
          if (!slot || slot.generation !== revoked.generationId) return;
          const wasRunning = slot.state === 'running';
          if (slot.state === 'running' || slot.state === 'assigned') slot.state = 'revoked';
          slot.cadence?.stop();
          let flushed: WorkflowPersistResult | undefined;
          if (wasRunning && slot.flow) {
            try {
              // With what the in-process persists landed since the workflow's last persist.
              flushed = withUnreported(slot, await this.persists.persist(slot, reason));
            } catch (err) {
              // Fenced or failed: counted and logged; the next owner replays from the last commit.
              this.log.warn({ err, topic, partition }, 'flush on revoke did not land');
            }
          }
          await this.withRetry(`signal revoke of ${topic}-${partition}`, () =>
            this.o.signals.revoked(
              { flow: this.definition.name, topic, partition },
              { generation: revoked.generationId, memberId: revoked.memberId, flushed, reason },
            ),
          )
            .then(() => {
              slot.revokeSignalled = revoked.generationId;
            })
            .catch((err) => {
              slot.revokeUnsignalled = revoked.generationId;
              this.log.warn({ err, topic, partition }, 'could not signal the revoke');
            });
        }),
      ),
    );
  }

  // ---- activity side ---------------------------------------------------------------------------

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
    // Started at the join for this very owner (recoverAtJoin): take it over — unless it failed,
    // then recover afresh as the activity would have.
    const early = this.takeEarly(slot, r.owner);
    const fromJoin = early ? await early.catch(() => undefined) : undefined;
    const prepared = fromJoin ?? (await this.prepareRecovery(slot, r.owner));
    const { persistence, flow, assignedAt, phases } = prepared;
    let keys: number;
    try {
      if ('error' in prepared.outcome) throw prepared.outcome.error;
      keys = prepared.outcome.keys;
      if (slot.recoverSeq !== seq) throw new StaleGenerationError(`${r.topic}-${r.partition}: a newer recovery started meanwhile`);
    } catch (err) {
      if (slot.recoverSeq !== seq) await closeQuietly(persistence); // superseded: its producer is not the partition's any more
      throw err;
    }
    const stats = (persistence as { lastRecovery?: RecoveryFigures }).lastRecovery;
    const read = stats?.records ?? keys;
    // Local state on: where the keys came from (the workflow's status query shows it).
    const local = stats?.restore && stats.fromLocal !== undefined
      ? { fromLocal: stats.fromLocal, fromTopic: stats.fromTopic, restore: stats.restore, fullRestoreReason: stats.fullRestoreReason }
      : {};
    this.slotFor(r); // still ours after the (possibly long) read
    slot.flow = flow;
    slot.flowGeneration = r.owner.generation;
    slot.installedSeq = seq;
    slot.recovery = r.recovery;
    slot.cadence?.stop();
    slot.cadence = this.persists.cadenceFor(slot, flow);
    if (slot.state === 'failed' || slot.state === 'fenced') slot.state = 'assigned';
    this.consumer.seek({ topic: r.topic, partition: r.partition, offset: assignedAt });
    this.consumer.pause(tp);
    const ms = performance.now() - started;
    // Started at the join: how long before this activity it started, and how long the activity waited for it.
    const atJoin = fromJoin ? { startedBeforeMs: Math.round(started - fromJoin.startedAt), waitedMs: Math.round(ms) } : undefined;
    this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation, keys, snapshotsRead: read, ms: Math.round(ms), phases, ...(atJoin ? { atJoin } : {}) }, 'recovered');
    return { fromMemory: false, keys, snapshotsRead: read, ms, committedOffset: assignedAt, ...local };
  }

  /**
   * A full recovery's work, before its engine is installed: fence the partition's persistence
   * under `owner` (the backend fences before it reads anything), read the group's committed
   * offset meanwhile, then the persisted state. A failure of the state read is returned (the
   * caller decides, knowing whether it was superseded); one before that is thrown.
   */
  private async prepareRecovery(slot: Slot, owner: { generation: number; memberId: string }): Promise<Prepared> {
    const startedAt = performance.now();
    const { topic, partition } = slot;
    // The group's committed offset is read while the backend fences (it was read after): a stable
    // read (require_stable, see FlowConsumer.committedOffset) waits out a transaction still pending
    // on it, and no earlier owner can move it after that, its commits carrying a generation the
    // group has left. (The fence still comes before every read of the snapshots and every write.)
    const committedRead = this.consumer.committedOffset(topic, partition);
    let committedReadDone = false;
    committedRead.then(
      () => (committedReadDone = true),
      () => (committedReadDone = true), // awaited below, unless the backend fails first
    );
    let settled: Promise<string | undefined> | undefined;
    const afterFence = () => {
      if (!settled) {
        settled = committedRead;
        if (!committedReadDone) {
          // Still waiting, most likely on a transaction a dead owner left open that only the fence
          // has just aborted: a read from now on answers at once, rather than after the read's backoff.
          const again = this.consumer.committedOffset(topic, partition);
          again.catch(() => undefined);
          settled = Promise.race([committedRead, again]);
        }
      }
      return settled;
    };
    const persistence = await this.o.backend.forPartition({
      topic,
      partition,
      groupId: this.definition.groupId,
      generation: owner.generation,
      memberId: owner.memberId,
      committer: {
        commit: async (_tp, offset) => {
          // kafkajs commits with the member's live generation, which the broker accepts even when
          // the new generation gave this partition to someone else: check that we still hold it.
          PartitionSlots.assertHolds(slot, this.consumer.current());
          await this.consumer.commitOffsets([{ topic, partition, offset: offsetToKafka(offset) }]);
        },
      },
      liveGeneration: () => ({ generationId: slot.flowGeneration ?? owner.generation, memberId: slot.memberId }),
      // The Kafka backend seeds its transactions with it once fenced, instead of reading it again.
      committedOffset: afterFence,
    });
    const persistenceMs = performance.now() - startedAt;
    const committed = await afterFence();
    const committedMs = performance.now() - startedAt - persistenceMs;
    const assignedAt = committed ?? '0';
    const flow = createPartitionFlow(this.definition, {
      topic,
      partition,
      assignedAt,
      persistence,
      logger: this.log,
      metrics: this.o.metrics,
    });
    let outcome: Prepared['outcome'];
    try {
      outcome = { keys: await flow.recover() };
    } catch (error) {
      outcome = { error };
    }
    const ms = performance.now() - startedAt;
    const phases = { persistence: Math.round(persistenceMs), committed: Math.round(committedMs), read: Math.round(ms - persistenceMs - committedMs) };
    return { persistence, flow, assignedAt, outcome, phases, startedAt };
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
  startFolding(r: OwnerRequest): FoldingHandle {
    const slot = this.slotFor(r);
    const handle = this.slots.startFolding(slot, r, () => this.stopping);
    slot.handoff ??= new BatchHandoff();
    const handoff = slot.handoff;
    slot.cadence?.start();
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

  private async withRetry<T>(what: string, fn: () => Promise<T>, attempts = 10): Promise<T> {
    let delay = 200;
    for (let i = 1; ; i++) {
      try {
        return await fn();
      } catch (err) {
        if (i >= attempts || this.stopping) throw err;
        this.log.warn({ err, attempt: i }, `retrying: ${what}`);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }
}

/**
 * How often the owning process runs its partitions' key timers (and, for a flow with outputs,
 * looks for keys whose outputs are due): every `fireEvery`, at most 1 s apart, and for a flow
 * with outputs at most `outputEvery / 2` apart — so an output lands within `outputEvery` plus
 * half of it — but never more often than every 100 ms.
 */
export function timerTickMs(definition: Pick<FlowDefinition<unknown, unknown>, 'outputTopics' | 'deadLetterTopics' | 'outputEveryMs' | 'timers'>): number {
  const outputsTick = hasOutputs(definition) ? definition.outputEveryMs / 2 : Number.POSITIVE_INFINITY;
  return Math.max(100, Math.min(definition.timers.fireEvery, 1000, outputsTick));
}
