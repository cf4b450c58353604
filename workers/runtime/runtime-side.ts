import type { Logger } from '../../core/logger';
import type { FlowDefinition } from '../../define-flow';
import type { FlowMetrics } from '../../flow/metrics';
import type { StateCache } from '../../flow/state-cache';
import type { PersistenceBackend } from '../../persistence/backends';
import type { FlowConsumer } from './flow-consumer';
import type { PartitionSignals } from './partition-signals';
import type { PartitionSlots } from './partition-slots';
import type { SlotPersists } from './slot-persists';

export interface FlowRuntimeOptions {
  definition: FlowDefinition<unknown, unknown>;
  /** The flow's group consumer (KafkaFlowConsumer in a worker). */
  consumer: FlowConsumer;
  /** Tells the partition workflows about assignments and revokes (TemporalPartitionSignals in a worker). */
  signals: PartitionSignals;
  /** This process's own activity task queue. */
  taskQueue: string;
  /** This process's HTTP base URL, recorded with its assignments (Owner.httpAddress); undefined: it serves none. */
  httpAddress?: string;
  backend: PersistenceBackend<unknown, unknown>;
  metrics: FlowMetrics;
  logger: Logger;
  /** Continue-as-new threshold passed to new partition workflows (KFT_MAX_HISTORY_EVENTS). */
  maxHistoryEvents?: number;
  /** The least time between a partition workflow's persist reports, passed to new partition workflows (KFT_WORKFLOW_REPORT_EVERY_MS). */
  workflowReportEveryMs?: number;
  /** How often a long recovery tells its partition workflow how far it is (KFT_RESTORE_REPORT_EVERY_MS, default 10 s). */
  restoreReportEveryMs?: number;
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
  /**
   * With recoverAtJoin: a recovery done before its activity came installs its engine and folds the
   * partition at once, ahead of the workflow, until the workflow's recover activity and fold loop
   * take over (HostSide.foldEarly). Default false (the workers turn it on: KFT_FOLD_AT_JOIN).
   */
  foldAtJoin?: boolean;
  /** The bounded state cache its partitions share (FlowOptions.stateCache); undefined: every key in memory. */
  stateCache?: StateCache;
  /**
   * A graceful stop, once its revokes are flushed and signalled and before the member leaves the
   * group (the leave starts the rebalance that hands the partitions to other members). The worker
   * stops its workflow worker here: the next owners' signals then find it gone, not stopping
   * (workers/worker.ts). Not awaited past the consumer's session timeout by the group.
   */
  beforeLeave?: () => Promise<void>;
}

/** What the parts of a flow's runtime share: the flow, its consumer, its slots and persists, and whether the process is stopping. */
export interface RuntimeContext {
  readonly options: FlowRuntimeOptions;
  readonly slots: PartitionSlots;
  readonly persists: SlotPersists;
  stopping(): boolean;
}

/** A part of a flow's runtime (its consumer side, its host side, its recoveries), over the shared context. */
export abstract class RuntimeSide {
  protected readonly o: FlowRuntimeOptions;
  protected readonly definition: FlowDefinition<unknown, unknown>;
  protected readonly taskQueue: string;
  protected readonly consumer: FlowConsumer;
  protected readonly slots: PartitionSlots;
  protected readonly persists: SlotPersists;
  protected readonly log: Logger;
  private readonly ctx: RuntimeContext;

  constructor(ctx: RuntimeContext) {
    this.ctx = ctx;
    this.o = ctx.options;
    this.definition = ctx.options.definition;
    this.taskQueue = ctx.options.taskQueue;
    this.consumer = ctx.options.consumer;
    this.slots = ctx.slots;
    this.persists = ctx.persists;
    this.log = ctx.options.logger;
  }

  /** The process is stopping: nothing new starts. */
  protected get stopping(): boolean {
    return this.ctx.stopping();
  }
}
