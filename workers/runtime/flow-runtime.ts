import type { PartitionHost } from '../../activities/partition-host';
import type { FoldLoopRequest, OwnerRequest, PersistResult, RecoverRequest, RecoverResult } from '../../activities/types';
import { KafkaFlowError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';
import type { KeyLookup } from '../../flow/partition-flow';
import { hasOutputs } from './batch-fold';
import { ConsumerSide } from './consumer-side';
import { HostSide } from './host-side';
import { PartitionRecoveries } from './partition-recoveries';
import { PartitionSlots } from './partition-slots';
import type { FlowRuntimeOptions, RuntimeContext } from './runtime-side';
import { SlotPersists } from './slot-persists';

export { StaleGenerationError } from '../../activities/partition-host';

/** What `/readyz` asks of a flow's runtime: joined, and which partitions of its generation are not folding yet. */
export interface PartitionsReadiness {
  readonly joined: boolean;
  /** Partitions assigned to this process in the current generation. */
  readonly assigned: number;
  readonly notReady: ReadonlyArray<{ topic: string; partition: number; state: string }>;
}

/** A key looked up by the partition's owner (FlowRuntime.lookupKey). */
export interface OwnedKey {
  readonly generation: number;
  readonly memberId: string;
  /** The partition's committed offset and position (one past the last record folded). */
  readonly committedOffset: number;
  readonly position: number;
  /** Undefined: the partition holds nothing for the key. */
  readonly lookup: KeyLookup<unknown> | undefined;
}

/** A live state query reached a process that does not fold the partition now (not assigned here, or still recovering). */
export class NotOwnerHereError extends KafkaFlowError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly state: string,
  ) {
    super('NOT_OWNER_HERE', `${topic}-${partition} is not folded by this process now (${state})`);
  }
}
export { hasOutputs } from './batch-fold';
export type { FlowRuntimeOptions } from './runtime-side';

/**
 * A flow in one worker process: its group consumer, the partitions it owns (PartitionSlots) and
 * their engines. Its consumer side (ConsumerSide) handles joins, batches and revokes; its host side
 * (HostSide) answers the partition workflows' activities — recover, fold, persist — and is this
 * object's PartitionHost; the consumer hands each batch to its partition's fold-loop activity,
 * which folds it. What a persist of a partition does here is SlotPersists.
 */
/** One partition as partitionFigures() reports it. */
export interface PartitionFigures {
  topic: string;
  partition: number;
  /** recovering (no engine yet), assigned (recovered, no fold loop yet), running, revoked, fenced or failed. */
  state: string;
  lag?: number;
  commitLag?: number;
}

export class FlowRuntime implements PartitionHost {
  /** The partitions whose state is in memory here (an engine, running or kept across a revoke), by topic: the assignor keeps them here. */
  heldPartitions(): Record<string, number[]> {
    const out: Record<string, number[]> = {};
    for (const slot of this.slots.all()) {
      if (slot.flow === undefined || slot.flow.failed !== undefined) continue;
      const list = out[slot.topic];
      if (list) list.push(slot.partition);
      else out[slot.topic] = [slot.partition];
    }
    return out;
  }

  readonly definition: FlowDefinition<unknown, unknown>;
  readonly taskQueue: string;
  private readonly o: FlowRuntimeOptions;
  private readonly recoveries: PartitionRecoveries;
  private readonly consumerSide: ConsumerSide;
  private readonly host: HostSide;
  private readonly slots: PartitionSlots;
  private timers?: NodeJS.Timeout;
  private watchdog?: NodeJS.Timeout;
  private stopping = false;

  constructor(options: FlowRuntimeOptions) {
    this.o = options;
    this.definition = options.definition;
    this.taskQueue = options.taskQueue;
    this.slots = new PartitionSlots();
    const stopping = () => this.stopping;
    const persists = new SlotPersists({ definition: options.definition, consumer: options.consumer, log: options.logger, stopping });
    const ctx: RuntimeContext = { options, slots: this.slots, persists, stopping };
    this.recoveries = new PartitionRecoveries(ctx);
    this.consumerSide = new ConsumerSide(ctx, this.recoveries);
    this.host = new HostSide(ctx, this.recoveries);
    if (options.foldAtJoin) this.recoveries.foldEarly = (slot, owner, prepared) => this.host.foldEarly(slot, owner, prepared);
  }

  async start(): Promise<void> {
    await this.o.consumer.start(this.consumerSide.handlers());
    this.timers = setInterval(() => this.host.triggerTimers(), timerTickMs(this.definition));
    const reassertAfterMs = this.o.reassertAfterMs ?? 30_000;
    this.watchdog = setInterval(() => this.consumerSide.reassertStalled(reassertAfterMs), Math.max(250, Math.min(reassertAfterMs / 2, 5_000)));
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
    this.recoveries.dropAll();
    await this.o.consumer.stop();
    this.o.logger.info('left the group'); // the worker's logger names the flow
    await this.host.whenActivitiesIdle(activitiesGraceMs);
    await this.o.consumer.close();
    await this.o.backend.close();
  }

  /**
   * Whether this process is folding everything it was assigned: joined the group, and every
   * partition of the current generation recovered and driven by a fold loop (`/readyz`).
   */
  partitionsReady(): PartitionsReadiness {
    const current = this.o.consumer.current();
    if (!current || this.stopping) return { joined: false, assigned: 0, notReady: [] };
    let assigned = 0;
    const notReady: Array<{ topic: string; partition: number; state: string }> = [];
    for (const slot of this.slots.all()) {
      if (!PartitionSlots.holds(slot, current)) continue;
      assigned++;
      if (slot.state !== 'running' || !slot.flow || slot.flow.failed !== undefined || slot.earlyFold) {
        const state = slot.flow?.failed !== undefined ? 'failed' : slot.earlyFold ? 'folding, awaiting its workflow' : slot.state;
        notReady.push({ topic: slot.topic, partition: slot.partition, state });
      }
    }
    return { joined: true, assigned, notReady };
  }

  /**
   * Where each partition of the current generation stands in this process, for the gauges read at
   * each scrape (workers/observability/partition-gauges.ts): its state, and once it has an engine,
   * its lag (log end of the last fetch − position) and commit lag (position − committed offset).
   */
  partitionFigures(): PartitionFigures[] {
    const current = this.o.consumer.current();
    if (!current || this.stopping) return [];
    const figures: PartitionFigures[] = [];
    for (const slot of this.slots.all()) {
      if (!PartitionSlots.holds(slot, current)) continue;
      const flow = slot.flowGeneration === slot.generation ? slot.flow : undefined;
      const state = flow?.failed !== undefined ? 'failed' : slot.state === 'assigned' && !flow ? 'recovering' : slot.state;
      const hw = slot.highWatermark;
      figures.push({
        topic: slot.topic,
        partition: slot.partition,
        state,
        lag: flow && hw !== undefined ? Math.max(0, hw - flow.position) : undefined,
        commitLag: flow ? Math.max(0, flow.position - flow.committedOffset) : undefined,
      });
    }
    return figures;
  }

  /**
   * A key's live state, answered by this process as the partition's owner: its engine's memory, or
   * its store for a key unloaded from memory. NotOwnerHereError when this process does not fold the
   * partition now (not assigned here, or still recovering): the asker falls back to the snapshot.
   */
  async lookupKey(topic: string, partition: number, key: string): Promise<OwnedKey> {
    const current = this.o.consumer.current();
    const slot = this.slots.get(topic, partition);
    const flow = slot?.flow;
    if (!slot || !PartitionSlots.holds(slot, current) || slot.state !== 'running' || !flow) {
      throw new NotOwnerHereError(topic, partition, slot && PartitionSlots.holds(slot, current) ? slot.state : 'not assigned');
    }
    return {
      generation: slot.generation,
      memberId: slot.memberId,
      committedOffset: flow.committedOffset,
      position: flow.position,
      lookup: await flow.lookup(key),
    };
  }

  // The activities' PartitionHost: the host side answers.
  activity<T>(fn: () => Promise<T>): Promise<T> {
    return this.host.activity(fn);
  }
  recover(r: RecoverRequest): Promise<RecoverResult> {
    return this.host.recover(r);
  }
  recoveryDone(r: FoldLoopRequest): 'done' | 'waiting' | 'ended' {
    return this.host.recoveryDone(r);
  }
  startFolding(r: OwnerRequest): ReturnType<PartitionHost['startFolding']> {
    return this.host.startFolding(r);
  }
  stopFolding(r: OwnerRequest, token: number): void {
    this.host.stopFolding(r, token);
  }
  lastPersistAt(r: OwnerRequest): number | undefined {
    return this.host.lastPersistAt(r);
  }
  persistReadiness(r: OwnerRequest): 'persist' | 'skip' | 'wait' {
    return this.host.persistReadiness(r);
  }
  persist(r: OwnerRequest): Promise<PersistResult> {
    return this.host.persist(r);
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
