import type { PartitionHost } from '../../activities/partition-host';
import type { FoldLoopRequest, OwnerRequest, PersistResult, RecoverRequest, RecoverResult } from '../../activities/types';
import type { FlowDefinition } from '../../define-flow';
import { hasOutputs } from './batch-fold';
import { ConsumerSide } from './consumer-side';
import { HostSide } from './host-side';
import { PartitionRecoveries } from './partition-recoveries';
import { PartitionSlots } from './partition-slots';
import type { FlowRuntimeOptions, RuntimeContext } from './runtime-side';
import { SlotPersists } from './slot-persists';

export { StaleGenerationError } from '../../activities/partition-host';
export { hasOutputs } from './batch-fold';
export type { FlowRuntimeOptions } from './runtime-side';

/**
 * A flow in one worker process: its group consumer, the partitions it owns (PartitionSlots) and
 * their engines. Its consumer side (ConsumerSide) handles joins, batches and revokes; its host side
 * (HostSide) answers the partition workflows' activities — recover, fold, persist — and is this
 * object's PartitionHost; the consumer hands each batch to its partition's fold-loop activity,
 * which folds it. What a persist of a partition does here is SlotPersists.
 */
export class FlowRuntime implements PartitionHost {
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
    await this.host.whenActivitiesIdle(activitiesGraceMs);
    await this.o.consumer.close();
    await this.o.backend.close();
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
