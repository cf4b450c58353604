import type { EachBatchPayload } from 'kafkajs';
import { cachedPartition } from '../../flow/state-cache';
import type { PersistResult as WorkflowPersistResult } from '../../activities/types';
import { offsetFromKafka } from '../../flow/offsets';
import { type GroupGeneration, newlyAssigned, ownershipGeneration, type RevokedPartitions } from '../../kafka';
import type { FlowConsumerHandlers } from './flow-consumer';
import { heartbeatDuring } from './batch-heartbeats';
import { InputOffsetOutOfRangeError, outOfRangeAction } from './input-offset-range';
import type { PartitionRecoveries } from './partition-recoveries';
import { PartitionSlots } from './partition-slots';
import { type RuntimeContext, RuntimeSide } from './runtime-side';
import { withUnreported } from './slot-persists';

/** How long a batch callback heartbeats while it waits for its fold (heartbeatDuring): the Java consumer's max.poll.interval.ms default. */
const MAX_BATCH_WAIT_MS = 300_000;

/** How long a revoke waits for a batch of the partition still folding before it flushes regardless. */
const REVOKE_WAITS_FOR_BATCH_MS = 10_000;

/**
 * A flow's consumer side in one process: what the group consumer calls back — a join (pause, signal
 * the partition workflows, start recovering), each fetched batch (handed to its partition's fold
 * loop), the awaited revoke point (flush, signal) — and the watchdog that signals the assignment
 * of a partition held here but not folding again.
 */
export class ConsumerSide extends RuntimeSide {
  constructor(
    ctx: RuntimeContext,
    private readonly recoveries: PartitionRecoveries,
  ) {
    super(ctx);
  }

  /** The handlers the group consumer starts with. */
  handlers(): FlowConsumerHandlers {
    return {
      onJoin: (g) => this.onJoin(g),
      onRevoke: (revoked) => this.onRevoke(revoked),
      eachBatch: (payload) => this.eachBatch(payload),
      onOffsetOutOfRange: (at) => this.onOffsetOutOfRange(at),
    };
  }

  onJoin(g: GroupGeneration): void {
    // Synchronous: runs before the consumer fetches under the new generation, so every newly
    // assigned partition is paused until its workflow has recovered it here. A partition a
    // cooperative rebalance kept goes on as it was: no pause, no signal, no recovery.
    const fresh = newlyAssigned(g);
    for (const [topic, partitions] of Object.entries(fresh)) {
      if (partitions.length > 0) this.consumer.pause([{ topic, partitions }]);
    }
    if (this.stopping) {
      // kafkajs can complete a rejoin it had begun (e.g. after "the coordinator is not aware of
      // this member") while the member is leaving: signalled, the partitions' workflows would send
      // their recoveries here, to a backend about to close. Left alone, the member's leave makes
      // the group assign them again, to a member that stays.
      this.log.info({ generation: g.generationId, assignment: g.assignment }, 'partitions assigned while stopping: left to the next assignment');
      return;
    }
    for (const slot of this.slots.join(g)) {
      // revoked for good: its state and producer go
      this.recoveries.drop(slot);
      slot.cadence?.stop();
      this.o.stateCache?.forget(cachedPartition(slot.topic, slot.partition));
      void this.o.backend.release?.({ topic: slot.topic, partition: slot.partition }).catch((err) => this.log.warn({ err }, 'release failed'));
    }
    // Standby copies of partitions others own (the state assignor's tasks); the others stop.
    this.o.backend.standby?.(g.standby ?? {});
    this.log.info(
      { generation: g.generationId, memberId: g.memberId, assignment: g.assignment, ...(g.standby && Object.keys(g.standby).length > 0 ? { standby: g.standby } : {}) },
      'partitions assigned',
    );
    const joined = { ...g, assignment: fresh };
    void this.signalAssignments(joined).catch((err) => this.log.error({ err }, 'could not signal the partition workflows'));
    if (this.o.recoverAtJoin !== false) this.recoveries.startAtJoin(joined);
  }

  /** Signals each partition of `g.assignment` to its workflow, under its ownership generation in `g`. */
  private async signalAssignments(g: GroupGeneration): Promise<void> {
    const persistEveryMs = this.definition.timers.persistEvery ?? 60_000;
    const { maxHistoryEvents, workflowReportEveryMs } = this.o;
    const limits = {
      ...(maxHistoryEvents ? { maxHistoryEvents } : {}),
      ...(workflowReportEveryMs ? { reportEveryMinMs: workflowReportEveryMs } : {}),
      // A partition with no live owner for the session timeout shows `unowned` (none will come).
      unownedAfterMs: this.definition.consumer.sessionTimeoutMs,
    };
    await Promise.all(
      Object.entries(g.assignment).flatMap(([topic, partitions]) =>
        partitions.map(async (partition) => {
          const ref = { flow: this.definition.name, topic, partition };
          await this.withRetry(`signal assignment of ${topic}-${partition}`, () =>
            this.o.signals.assigned(
              { ...ref, persistEveryMs, limits: Object.keys(limits).length > 0 ? limits : undefined },
              {
                generation: ownershipGeneration(g, topic, partition) ?? g.generationId,
                memberId: g.memberId,
                taskQueue: this.taskQueue,
                foldAwaitsRecovery: true,
                ...(this.o.httpAddress ? { httpAddress: this.o.httpAddress } : {}),
              },
            ),
          );
        }),
      ),
    );
  }

  /**
   * A fetched batch goes to the partition's fold-loop activity, which folds it (BatchFold); the
   * callback returns once it is folded, so kafkajs goes on as if it had folded it itself. It
   * heartbeats meanwhile (at half the heartbeat interval: kafkajs sends one per interval at most),
   * however long the fold waits (heartbeatDuring).
   */
  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    const slot = this.slots.get(payload.batch.topic, payload.batch.partition);
    if (slot) slot.lastBatchAt = Date.now();
    const handoff = slot?.state === 'running' ? slot.handoff : undefined;
    if (!handoff) {
      payload.pause(); // no fold loop (any more): nothing resolved, nothing skipped
      return;
    }
    const folding = handoff.hand(payload);
    slot!.batchInFlight = folding;
    try {
      const heartbeats = {
        everyMs: Math.max(100, this.definition.consumer.heartbeatIntervalMs / 2),
        maxMs: MAX_BATCH_WAIT_MS,
        onGiveUp: (waitedMs: number) =>
          this.log.error(
            { topic: payload.batch.topic, partition: payload.batch.partition, waitedMs, maxMs: MAX_BATCH_WAIT_MS },
            'a batch has waited for its fold past maxMs: heartbeats stop, so that the group gives this worker\'s partitions to another member unless the fold ends first',
          ),
      };
      if (!(await heartbeatDuring(payload.heartbeat, heartbeats, folding))) payload.pause();
    } finally {
      if (slot!.batchInFlight === folding) slot!.batchInFlight = undefined;
    }
  }

  /**
   * A fetch was out of the partition's range. Records the topic's retention deleted before they
   * were folded are gone: counted, logged as an error, and folding goes on from the log start
   * (the flow's next persist commits past them, fenced as every commit). An offset past the log
   * end stops the partition (InputOffsetOutOfRangeError). Nothing is committed here.
   */
  private async onOffsetOutOfRange(at: { topic: string; partition: number; fetchOffset: string }): Promise<void> {
    const { topic, partition } = at;
    const tp = [{ topic, partitions: [partition] }];
    const slot = this.slots.get(topic, partition);
    const current = this.consumer.current();
    if (slot?.state !== 'running' || !slot.flow || !PartitionSlots.holds(slot, current)) {
      this.consumer.pause(tp); // not being folded here: its next recovery seeks it
      return;
    }
    const offset = offsetFromKafka(at.fetchOffset);
    let range: { start: number; end: number };
    try {
      range = await this.consumer.logRange(topic, partition);
    } catch (err) {
      this.log.warn({ err, topic, partition, offset }, 'input offset out of range; the partition\'s log range could not be read: fetching again in 1 s');
      await new Promise((r) => setTimeout(r, 1_000));
      return;
    }
    const next = outOfRangeAction(offset, range.start, range.end);
    if (next.action === 'skip-deleted') {
      this.o.metrics.inputDeletedUnfolded.labels({ flow: this.definition.name, topic, partition: String(partition) }).inc(next.deleted);
      this.log.error(
        { topic, partition, from: offset, to: next.resumeAt, records: next.deleted },
        `input records deleted by the topic's retention before this flow folded them: offsets ${offset}..${next.resumeAt - 1} skipped, folding goes on from the log start (raise the topic's retention.ms / retention.bytes above the flow's worst lag)`,
      );
      this.consumer.seek({ topic, partition, offset: String(next.resumeAt) });
    } else if (next.action === 'stop') {
      const failure = this.persists.failed(slot, new InputOffsetOutOfRangeError(topic, partition, offset, range.start, range.end));
      this.consumer.pause(tp);
      this.log.error({ err: failure, topic, partition }, 'partition failed; its workflow recovers it on this worker after a backoff (phase retrying)');
    }
  }

  /**
   * The awaited revoke point: in-flight batches are done; flush under the generation being given
   * up — or, cooperative (`incremental`), under the one just joined, which gives the partitions
   * being revoked to no one. The workflow hears of the revoke of the generation it knows the
   * partition by (its ownership generation).
   */
  private async onRevoke(revoked: RevokedPartitions): Promise<void> {
    const reason = revoked.reason === 'leave' ? 'shutdown' : 'revoke';
    // The join being given up (eager, leave) or just joined (incremental): the partitions it holds.
    const current = this.consumer.current();
    const givenUp = current?.generationId === revoked.generationId ? current : undefined;
    await Promise.all(
      revoked.assignment.flatMap(({ topic, partitions }) =>
        partitions.map(async (partition) => {
          const slot = this.slots.get(topic, partition);
          if (!slot || !PartitionSlots.holds(slot, givenUp)) return;
          const owned = slot.generation;
          const wasRunning = slot.state === 'running';
          if (slot.state === 'running' || slot.state === 'assigned') slot.state = 'revoked';
          slot.cadence?.stop();
          // Cooperative: the consumer goes on fetching through the rebalance, so a batch of this
          // partition may be folding now (eager: kafkajs revokes after its batches ended). It stops
          // at its next check of the slot; the flush comes after it.
          if (slot.batchInFlight) await Promise.race([slot.batchInFlight.catch(() => undefined), new Promise((r) => setTimeout(r, REVOKE_WAITS_FOR_BATCH_MS))]);
          let flushed: WorkflowPersistResult | undefined;
          // Lost (the group went on without this member's ownership): nothing can commit; the next owner replays.
          if (wasRunning && slot.flow && !revoked.lost) {
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
              { generation: owned, memberId: revoked.memberId, flushed, reason },
            ),
          )
            .then(() => {
              slot.revokeSignalled = owned;
            })
            .catch((err) => {
              slot.revokeUnsignalled = owned;
              this.log.warn({ err, topic, partition }, 'could not signal the revoke');
            });
        }),
      ),
    );
    if (revoked.reason === 'leave' && this.stopping && this.o.beforeLeave) {
      await this.o.beforeLeave().catch((err) => this.log.warn({ err }, 'the step before leaving the group failed; leaving'));
    }
  }

  /**
   * The orchestration's own self-healing: a partition this process holds (current generation)
   * whose fold loop has not run for `afterMs` gets its assignment signalled again. Nothing changes
   * for a workflow that is alive (it ignores an assignment it has); one that closed (failed on a
   * nondeterminism error, or was terminated) is started afresh by the signal and recovers the
   * partition here from its persisted state.
   */
  reassertStalled(afterMs: number): void {
    const current = this.consumer.current();
    if (!current || this.stopping) return;
    const now = Date.now();
    const stalled: Array<{ topic: string; partition: number }> = [];
    for (const slot of this.slots.all()) {
      // Folding ahead of its workflow (earlyFold) is not folding for this watchdog: no workflow drives it yet.
      if (!PartitionSlots.holds(slot, current) || (slot.state === 'running' && !slot.earlyFold) || slot.state === 'revoked') {
        slot.notFoldingSince = undefined;
        continue;
      }
      slot.notFoldingSince ??= now;
      if (now - slot.notFoldingSince < afterMs) continue;
      slot.notFoldingSince = now; // again after another afterMs, not at every tick
      stalled.push({ topic: slot.topic, partition: slot.partition });
    }
    this.resumeQuiet(current, afterMs, now);
    if (stalled.length === 0) return;
    this.log.warn({ partitions: stalled.map((p) => `${p.topic}-${p.partition}`), afterMs }, 'partitions held here but not folding: signalling their assignment again');
    const assignment: Record<string, number[]> = {};
    for (const p of stalled) assignment[p.topic] = [...(assignment[p.topic] ?? []), p.partition];
    // A workflow whose every task fails on a Temporal SDK state-machine error would ignore the
    // signal forever: its run is terminated first, and the signal starts a fresh one.
    const unstick = this.o.signals.unstick;
    void Promise.all(stalled.map((p) => (unstick ? unstick.call(this.o.signals, { flow: this.definition.name, ...p }) : Promise.resolve(false))))
      .then(() => this.signalAssignments({ ...current, assignment }))
      .catch((err) => this.log.warn({ err }, 'could not signal the assignment again'));
  }

  /**
   * A partition folding here that the consumer has handed no batch for `afterMs` while its log
   * holds records past the flow's position has its fetching resumed: a pause nothing undid would
   * otherwise hold it until the next rebalance. Resuming a partition that is not paused changes
   * nothing; the warning says it happened. Once per `afterMs` per partition.
   */
  private resumeQuiet(current: GroupGeneration, afterMs: number, now: number): void {
    for (const slot of this.slots.all()) {
      const flow = slot.flow;
      if (!PartitionSlots.holds(slot, current) || slot.state !== 'running' || !flow || now - (slot.lastBatchAt ?? now) < afterMs) continue;
      slot.lastBatchAt = now; // looked at again after another afterMs
      const { topic, partition } = slot;
      void this.consumer
        .logRange(topic, partition)
        .then(({ end }) => {
          if (end <= flow.position || slot.state !== 'running' || slot.flow !== flow) return;
          this.consumer.resume([{ topic, partitions: [partition] }]);
          this.log.warn({ topic, partition, position: flow.position, logEnd: end, quietMs: afterMs }, 'partition folding here but handed no batch while its log holds records past its position: its fetching resumed');
        })
        .catch((err) => this.log.debug({ err, topic, partition }, 'quiet partition: its log range could not be read'));
    }
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
