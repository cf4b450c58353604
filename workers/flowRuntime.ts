import type { Client } from '@temporalio/client';
import type { Consumer, EachBatchPayload } from 'kafkajs';
import { KafkaFlowError } from '../config/errors';
import type { OwnerRequest, PersistResult as WorkflowPersistResult, RecoverRequest, RecoverResult } from '../activities/types';
import { createPartitionFlow, type FlowDefinition } from '../flow/define-flow';
import type { Logger } from '../flow/logger';
import type { FlowMetrics } from '../flow/metrics';
import type { PartitionFlow } from '../flow/partition-flow';
import { CommittedOffsets, createKafkaClient, GroupMembership, type GroupGeneration, type KafkaClient, type RevokedPartitions, withRevokePoint } from '../kafka';
import { ProducerEpochLostError, SnapshotWriteConflictError, SnapshotWriteFencedError } from '../persistence/errors';
import type { PartitionPersistence } from '../persistence/partition-persistence';
import { assignedSignal, partitionWorkflow, partitionWorkflowId, revokedSignal } from '../workflows/partitionWorkflow';
import { searchAttributes } from '../workflows/searchAttributes';
import type { PersistenceBackend } from './backends';
import { WORKFLOW_TASK_QUEUE } from './taskQueues';

/** Why an activity refuses to act: the generation it was scheduled for is not this process's. */
export class StaleGenerationError extends KafkaFlowError {
  constructor(message: string) {
    super('STALE_GENERATION', message);
  }
}

type SlotState = 'assigned' | 'running' | 'revoked' | 'fenced' | 'failed';

export interface FoldingHandle {
  readonly token: number;
  /**
   * `settling`: revoked here (or the process is stopping and its revoke is coming), its revoke
   * signal not yet delivered — the loop should not end before it is.
   */
  poll(): { running: boolean; settling?: boolean; failure?: unknown; progress: Record<string, unknown> };
}

/** One input partition as this process holds it. */
interface Slot {
  readonly topic: string;
  readonly partition: number;
  /** The generation under which this process was (last) assigned the partition, and its member id then. */
  generation: number;
  memberId: string;
  state: SlotState;
  /** The engine, once recovered; kept across a revoke in case the partition comes back. */
  flow?: PartitionFlow<unknown, unknown>;
  /** The generation the engine's state was recovered or adopted under. */
  flowGeneration?: number;
  highWatermark?: string;
  /** Why the partition stopped here (state 'failed'). */
  failure?: unknown;
  /** Which fold-loop activity drives the partition now: a late cancellation of an older one must not pause it. */
  folding?: number;
  /** Bumped by every full recovery as it starts: only the latest may install its engine. */
  recoverSeq: number;
  /** The recoverSeq whose engine is installed: the in-memory shortcut is safe only while no recovery started since. */
  installedSeq?: number;
  /** The revoke of `generation` was signalled to the workflow (activities of that generation may end). */
  revokeSignalled?: number;
  /** Signalling the revoke of `generation` was given up: its activities need not wait for it. */
  revokeUnsignalled?: number;
}

export interface FlowRuntimeOptions {
  definition: FlowDefinition<unknown, unknown>;
  brokers: string[];
  temporal: Client;
  /** This process's own activity task queue. */
  taskQueue: string;
  backend: PersistenceBackend<unknown, unknown>;
  metrics: FlowMetrics;
  logger: Logger;
  /** `KFT_MAX_HISTORY_EVENTS` (config/env), given to the partition workflows it starts; undefined: their default. */
  maxHistoryEvents?: number;
}

/** What a persistence's `lastRecovery` may report (the Kafka backend's RecoveryStats). */
type RecoveryFigures = Partial<Pick<RecoverResult, 'fromLocal' | 'fromTopic' | 'restore' | 'fullRestoreReason'>> & { records?: number };

const tpKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

async function closeQuietly(p: PartitionPersistence<unknown, unknown>): Promise<void> {
  try {
    await p.close?.();
  } catch {
    // its producer may already be closed by the newer recovery's backend call
  }
}

/**
 * A flow in one worker process: its group consumer, the partitions it owns, their engines. The
 * consumer runs on its own; partition workflows drive recovery and persistence through the
 * activities, which call into this object.
 */
export class FlowRuntime {
  readonly definition: FlowDefinition<unknown, unknown>;
  readonly taskQueue: string;
  private readonly o: FlowRuntimeOptions;
  private readonly kafka: KafkaClient;
  private readonly consumer: Consumer;
  private readonly membership = new GroupMembership();
  private readonly committedOffsets: CommittedOffsets;
  private readonly slots = new Map<string, Slot>();
  private readonly log: Logger;
  private timers?: NodeJS.Timeout;
  private foldLoops = 0;
  private stopping = false;
  /** Activities of this process in flight (a graceful stop lets them end before the Temporal workers stop). */
  private activities = 0;
  private activitiesIdle: Array<() => void> = [];

  constructor(options: FlowRuntimeOptions) {
    this.o = options;
    this.definition = options.definition;
    this.taskQueue = options.taskQueue;
    this.log = options.logger;
    this.kafka = createKafkaClient({ brokers: options.brokers, clientId: `kafka-flow-temporal-${options.definition.name}` });
    this.committedOffsets = new CommittedOffsets(this.kafka);
    this.consumer = this.kafka.kafka.consumer(
      withRevokePoint(
        // maxWaitTimeInMs: kafkajs sleeps this long whenever every assigned partition is paused
        // (all are, until recovered), so its 5 s default would delay every start and rebalance.
        {
          groupId: options.definition.groupId,
          readUncommitted: false,
          allowAutoTopicCreation: false,
          maxWaitTimeInMs: 250,
          sessionTimeout: options.definition.consumer.sessionTimeoutMs,
          heartbeatInterval: options.definition.consumer.heartbeatIntervalMs,
          rebalanceTimeout: options.definition.consumer.rebalanceTimeoutMs,
        },
        (revoked) => this.onRevoke(revoked),
      ),
    );
  }

  async start(): Promise<void> {
    this.membership.attach(this.consumer);
    this.membership.onJoin((g) => this.onJoin(g));
    await this.consumer.connect();
    for (const topic of this.definition.topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: (payload) => this.eachBatch(payload),
    });
    const every = Math.max(100, Math.min(this.definition.timers.fireEvery, 1000));
    this.timers = setInterval(() => this.triggerTimers(), every);
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
    await this.consumer.disconnect();
    await this.whenActivitiesIdle(activitiesGraceMs);
    await this.committedOffsets.close();
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
    // Synchronous: runs before kafkajs fetches under the new generation, so every assigned
    // partition is paused until its workflow has recovered it here.
    const assigned = new Set<string>();
    for (const [topic, partitions] of Object.entries(g.assignment)) {
      if (partitions.length > 0) this.consumer.pause([{ topic, partitions }]);
      for (const partition of partitions) {
        const key = tpKey(topic, partition);
        assigned.add(key);
        const slot = this.slots.get(key);
        if (slot) {
          slot.generation = g.generationId;
          slot.memberId = g.memberId;
          if (slot.state !== 'fenced' && slot.state !== 'failed') slot.state = 'assigned';
        } else {
          this.slots.set(key, { topic, partition, generation: g.generationId, memberId: g.memberId, state: 'assigned', recoverSeq: 0 });
        }
      }
    }
    for (const [key, slot] of this.slots) {
      if (assigned.has(key)) continue;
      this.slots.delete(key); // revoked for good: its state and producer go
      void this.o.backend.release?.({ topic: slot.topic, partition: slot.partition }).catch((err) => this.log.warn({ err }, 'release failed'));
    }
    this.log.info(
      { generation: g.generationId, memberId: g.memberId, assignment: g.assignment },
      'partitions assigned',
    );
    void this.signalAssignments(g).catch((err) => this.log.error({ err }, 'could not signal the partition workflows'));
  }

  private async signalAssignments(g: GroupGeneration): Promise<void> {
    const persistEveryMs = this.definition.timers.persistEvery ?? 60_000;
    const maxHistoryEvents = this.o.maxHistoryEvents;
    await Promise.all(
      Object.entries(g.assignment).flatMap(([topic, partitions]) =>
        partitions.map(async (partition) => {
          const ref = { flow: this.definition.name, topic, partition };
          await this.withRetry(`signal assignment of ${topic}-${partition}`, () =>
            this.o.temporal.workflow.signalWithStart(partitionWorkflow, {
              workflowId: partitionWorkflowId(ref),
              taskQueue: WORKFLOW_TASK_QUEUE,
              args: [{ ...ref, persistEveryMs, limits: maxHistoryEvents ? { maxHistoryEvents } : undefined }],
              signal: assignedSignal,
              signalArgs: [{ generation: g.generationId, memberId: g.memberId, taskQueue: this.taskQueue }],
              typedSearchAttributes: [
                { key: searchAttributes.flow, value: this.definition.name },
                { key: searchAttributes.topic, value: topic },
                { key: searchAttributes.partition, value: partition },
              ],
            }),
          );
        }),
      ),
    );
  }

  private async eachBatch({ batch, resolveOffset, pause, heartbeat }: EachBatchPayload): Promise<void> {
    const slot = this.slots.get(tpKey(batch.topic, batch.partition));
    const current = this.membership.current();
    if (slot?.state !== 'running' || !slot.flow || !current || slot.generation !== current.generationId) {
      pause(); // not (or no longer) ours to process: nothing resolved, so nothing is skipped
      return;
    }
    slot.highWatermark = batch.highWatermark;
    try {
      const r = slot.flow.handleBatch(batch.messages);
      if (r) await r;
    } catch (err) {
      slot.state = 'failed';
      slot.failure = err;
      pause();
      this.log.error({ err, topic: batch.topic, partition: batch.partition }, 'partition failed; it stops until reassigned');
      return;
    }
    const last = batch.messages[batch.messages.length - 1];
    if (last) resolveOffset(last.offset);
    await heartbeat();
  }

  private triggerTimers(): void {
    for (const slot of this.slots.values()) {
      if (slot.state !== 'running' || !slot.flow) continue;
      try {
        slot.flow.triggerTimers();
      } catch (err) {
        slot.state = 'failed';
        slot.failure = err;
        this.log.error({ err, topic: slot.topic, partition: slot.partition }, 'timers failed');
      }
    }
  }

  /** The awaited revoke point: in-flight batches are done; flush under the generation being given up. */
  private async onRevoke(revoked: RevokedPartitions): Promise<void> {
    const reason = revoked.reason === 'leave' ? 'shutdown' : 'revoke';
    await Promise.all(
      revoked.assignment.flatMap(({ topic, partitions }) =>
        partitions.map(async (partition) => {
          const slot = this.slots.get(tpKey(topic, partition));
          if (!slot || slot.generation !== revoked.generationId) return;
          const wasRunning = slot.state === 'running';
          if (slot.state === 'running' || slot.state === 'assigned') slot.state = 'revoked';
          let flushed: WorkflowPersistResult | undefined;
          if (wasRunning && slot.flow) {
            try {
              flushed = await this.persistSlot(slot, reason);
            } catch (err) {
              // Fenced or failed: counted and logged; the next owner replays from the last commit.
              this.log.warn({ err, topic, partition }, 'flush on revoke did not land');
            }
          }
          await this.withRetry(`signal revoke of ${topic}-${partition}`, () =>
            this.o.temporal.workflow
              .getHandle(partitionWorkflowId({ flow: this.definition.name, topic, partition }))
              .signal(revokedSignal, { generation: revoked.generationId, memberId: revoked.memberId, flushed, reason }),
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
    const current = this.membership.current();
    const slot = this.slots.get(tpKey(r.topic, r.partition));
    if (!current || current.generationId !== r.owner.generation || current.memberId !== r.owner.memberId) {
      throw new StaleGenerationError(
        `${r.topic}-${r.partition}: scheduled for generation ${r.owner.generation}, this process is at ${current?.generationId ?? 'none'}`,
      );
    }
    if (!slot || slot.generation !== r.owner.generation) {
      throw new StaleGenerationError(`${r.topic}-${r.partition} is not assigned to this process in generation ${r.owner.generation}`);
    }
    return slot;
  }

  /** The process still holds the slot's partition under the generation its state belongs to. */
  private assertHolds(slot: Slot): void {
    const current = this.membership.current();
    if (!current || slot.generation !== current.generationId || slot.flowGeneration !== slot.generation) {
      throw new SnapshotWriteFencedError(slot.topic, slot.partition, 'this process no longer holds the partition in the current generation');
    }
  }

  async recover(r: RecoverRequest): Promise<RecoverResult> {
    const started = performance.now();
    const slot = this.slotFor(r);
    const tp = [{ topic: r.topic, partitions: [r.partition] }];
    if (
      r.keepFromGeneration !== undefined &&
      slot.flow &&
      slot.flowGeneration === r.keepFromGeneration &&
      slot.flow.failed === undefined &&
      slot.state !== 'failed' &&
      slot.state !== 'fenced' &&
      // A recovery started since this engine was installed may have initialized the partition's
      // transactional producer (fencing the engine's own) even if it was then cancelled.
      slot.installedSeq === slot.recoverSeq
    ) {
      // Same process, next generation, nobody else in between: keep the in-memory state and
      // continue from where this process was, not from the committed offset kafkajs rewound to.
      slot.flowGeneration = r.owner.generation;
      this.consumer.seek({ topic: r.topic, partition: r.partition, offset: slot.flow.position });
      this.consumer.pause(tp);
      this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation }, 'kept in-memory state');
      return { fromMemory: true, keys: slot.flow.liveKeys, snapshotsRead: 0, ms: performance.now() - started, committedOffset: slot.flow.committedOffset };
    }
    const seq = ++slot.recoverSeq;
    const persistence = await this.o.backend.forPartition({
      topic: r.topic,
      partition: r.partition,
      groupId: this.definition.groupId,
      generation: r.owner.generation,
      memberId: r.owner.memberId,
      committer: {
        commit: async (_tp, offset) => {
          // kafkajs commits with the member's live generation, which the broker accepts even when
          // the new generation gave this partition to someone else: check that we still hold it.
          this.assertHolds(slot);
          await this.consumer.commitOffsets([{ topic: r.topic, partition: r.partition, offset: String(offset) }]);
        },
      },
      liveGeneration: () => ({ generationId: slot.flowGeneration ?? r.owner.generation, memberId: slot.memberId }),
    });
    const committed = (await this.committedOffsets.fetch(this.definition.groupId, r.topic, [r.partition])).get(r.partition);
    const assignedAt = committed ?? '0';
    const flow = createPartitionFlow(this.definition, {
      topic: r.topic,
      partition: r.partition,
      assignedAt,
      persistence,
      logger: this.log,
      metrics: this.o.metrics,
    });
    let keys: number;
    try {
      keys = await flow.recover();
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
    if (slot.state === 'failed' || slot.state === 'fenced') slot.state = 'assigned';
    this.consumer.seek({ topic: r.topic, partition: r.partition, offset: assignedAt });
    this.consumer.pause(tp);
    const ms = performance.now() - started;
    this.log.info({ topic: r.topic, partition: r.partition, generation: r.owner.generation, keys, snapshotsRead: read, ms: Math.round(ms) }, 'recovered');
    return { fromMemory: false, keys, snapshotsRead: read, ms, committedOffset: assignedAt, ...local };
  }

  /**
   * Starts processing for one fold-loop activity; returns its token and a function reporting
   * progress and whether it should go on. A newer fold loop (after continue-as-new, or a retry of a
   * lost owner) takes over the partition from an older one that has not learned of its
   * cancellation yet.
   */
  startFolding(r: OwnerRequest): FoldingHandle {
    const slot = this.slotFor(r);
    if (!slot.flow || slot.flowGeneration !== r.owner.generation) {
      throw new StaleGenerationError(`${r.topic}-${r.partition} was not recovered for generation ${r.owner.generation}`);
    }
    const token = ++this.foldLoops;
    slot.folding = token;
    slot.state = 'running';
    this.consumer.resume([{ topic: r.topic, partitions: [r.partition] }]);
    return {
      token,
      poll: () => {
        const flow = slot.flow!;
        const running =
          slot.state === 'running' && slot.generation === r.owner.generation && slot.folding === token && !this.stopping;
        return {
          running,
          // A stop marks the process stopping before the consumer leaves and its revoke point
          // runs: the loop waits for that revoke's signal too, else the workflow would see an
          // ended loop first and take it for a lost owner instead of a clean stop.
          settling:
            (slot.state === 'revoked' || (this.stopping && slot.state === 'running')) &&
            slot.generation === r.owner.generation &&
            slot.revokeSignalled !== r.owner.generation &&
            slot.revokeUnsignalled !== r.owner.generation,
          failure: slot.state === 'failed' ? (slot.failure ?? flow.failed ?? new Error('partition failed')) : undefined,
          progress: {
            position: flow.position,
            committed: flow.committedOffset,
            liveKeys: flow.liveKeys,
            highWatermark: slot.highWatermark,
          },
        };
      },
    };
  }

  /** A fold loop ended (cancelled): stop fetching the partition, unless another loop took it over. */
  stopFolding(r: OwnerRequest, token: number): void {
    const slot = this.slots.get(tpKey(r.topic, r.partition));
    if (slot && slot.generation === r.owner.generation && slot.state === 'running' && slot.folding === token) {
      slot.state = 'assigned';
      this.consumer.pause([{ topic: r.topic, partitions: [r.partition] }]);
    }
  }

  /**
   * What a persist scheduled for `r` should do now: `persist` (the partition runs here), `skip`
   * (it was revoked here and the workflow has been told), `wait` (revoked, not yet signalled), or
   * it throws (failed here, or not this process's generation).
   */
  persistReadiness(r: OwnerRequest): 'persist' | 'skip' | 'wait' {
    const slot = this.slots.get(tpKey(r.topic, r.partition));
    if (slot && slot.generation === r.owner.generation && slot.state === 'revoked') {
      return slot.revokeSignalled === r.owner.generation ? 'skip' : 'wait';
    }
    if (this.stopping && slot?.revokeSignalled === r.owner.generation) return 'skip';
    const s = this.slotFor(r);
    if (s.state === 'failed') throw s.failure ?? new Error(`${r.topic}-${r.partition} failed`);
    // Not running yet (the fold loop starts alongside) or any more: persist() decides when due.
    return 'persist';
  }

  async persist(r: OwnerRequest): Promise<WorkflowPersistResult> {
    const slot = this.slotFor(r);
    if (slot.state === 'failed') throw slot.failure ?? new Error(`${r.topic}-${r.partition} failed`);
    if (!slot.flow || slot.state !== 'running') {
      throw new StaleGenerationError(`${r.topic}-${r.partition} is not running here (state ${slot.state})`);
    }
    return this.persistSlot(slot, 'periodic');
  }

  private async persistSlot(slot: Slot, reason: 'periodic' | 'revoke' | 'shutdown'): Promise<WorkflowPersistResult> {
    const flow = slot.flow!;
    const started = performance.now();
    flow.triggerTimers();
    let result: Awaited<ReturnType<typeof flow.persist>>;
    try {
      result = await flow.persist(undefined, reason);
    } catch (caught) {
      const err = this.classify(slot, caught);
      slot.state = err instanceof SnapshotWriteFencedError || err instanceof SnapshotWriteConflictError ? 'fenced' : 'failed';
      slot.failure = err;
      this.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]);
      throw err;
    }
    if (result.failed > 0) {
      // Revoke and shutdown persists report failed writes instead of throwing: those keys keep
      // holding their offsets, so the next owner replays them.
      this.log.warn({ topic: slot.topic, partition: slot.partition, reason, failed: result.failed }, 'some keys were not persisted');
    }
    if (result.fenced) {
      const err = this.classify(slot, flow.failed instanceof SnapshotWriteFencedError ? flow.failed : new SnapshotWriteFencedError(slot.topic, slot.partition, 'the persist was fenced'));
      slot.state = err instanceof SnapshotWriteFencedError ? 'fenced' : 'failed';
      slot.failure = err;
      this.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]);
      throw err;
    }
    const hw = slot.highWatermark;
    this.log.debug(
      { topic: slot.topic, partition: slot.partition, generation: slot.flowGeneration, reason, written: result.written, committed: flow.committedOffset },
      'persisted',
    );
    return {
      persistedKeys: result.written,
      deletedKeys: result.deleted ?? 0,
      deadLetters: result.deadLetters || undefined,
      committedOffset: flow.committedOffset,
      liveKeys: flow.liveKeys,
      logEndOffset: hw,
      lag: hw !== undefined ? Math.max(0, Number(hw) - Number(flow.position)) : undefined,
      ms: performance.now() - started,
      at: Date.now(),
    };
  }

  /**
   * A producer-epoch fence is a fence only when a newer owner exists. While the group's current
   * generation still gives the partition to this process, it is an aborted transaction (a
   * transaction timeout, or an earlier producer of ours re-initialized): the workflow retries.
   */
  private classify(slot: Slot, err: unknown): unknown {
    if (!(err instanceof SnapshotWriteFencedError) || err.reason !== 'producer-epoch') return err;
    const current = this.membership.current();
    const stillOurs =
      !this.stopping &&
      current !== undefined &&
      current.generationId === slot.generation &&
      (current.assignment[slot.topic] ?? []).includes(slot.partition);
    return stillOurs ? new ProducerEpochLostError(slot.topic, slot.partition, err) : err;
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
