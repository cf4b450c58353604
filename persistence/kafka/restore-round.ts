/**
 * The worker-wide line of a rebalance's restores (Kafka Streams logs one per rebalance): counts
 * the partition restores that overlap, and once none is running for `quietMs`, logs what they
 * restored in all — partitions, keys from local state, records from the topic, wall time.
 */
import type { Logger } from '../../core/logger';

export interface RestoreFigures {
  readonly fromLocal: number;
  readonly fromTopic: number;
  readonly full: boolean;
}

export interface RestoreRoundSummary {
  readonly partitions: number;
  readonly full: number;
  readonly failed: number;
  readonly fromLocal: number;
  readonly fromTopic: number;
  readonly ms: number;
}

export class RestoreRound {
  private running = 0;
  private current: { started: number; partitions: number; full: number; failed: number; fromLocal: number; fromTopic: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The last summary logged (tests). */
  last: RestoreRoundSummary | undefined;

  constructor(
    private readonly flow: string,
    private readonly log: Logger,
    private readonly quietMs = 500,
  ) {}

  begin(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.current ??= { started: performance.now(), partitions: 0, full: 0, failed: 0, fromLocal: 0, fromTopic: 0 };
    this.running++;
  }

  /** One restore ended; undefined when it failed. */
  end(figures: RestoreFigures | undefined): void {
    const c = this.current;
    if (!c) return;
    this.running = Math.max(0, this.running - 1);
    c.partitions++;
    if (!figures) c.failed++;
    else {
      c.fromLocal += figures.fromLocal;
      c.fromTopic += figures.fromTopic;
      if (figures.full) c.full++;
    }
    if (this.running === 0) {
      const ended = performance.now();
      this.timer = setTimeout(() => this.flush(ended), this.quietMs);
      this.timer.unref();
    }
  }

  private flush(ended: number): void {
    const c = this.current;
    this.current = undefined;
    this.timer = undefined;
    if (!c) return;
    const summary: RestoreRoundSummary = { partitions: c.partitions, full: c.full, failed: c.failed, fromLocal: c.fromLocal, fromTopic: c.fromTopic, ms: ended - c.started };
    this.last = summary;
    this.log.info(
      { flow: this.flow, ...summary, ms: Math.round(summary.ms) },
      `restored ${summary.partitions} partition(s) of flow ${this.flow} in this rebalance: ${summary.fromLocal} from local state, ` +
        `${summary.fromTopic} from the topic, ${summary.full} full restore(s), ${Math.round(summary.ms)} ms`,
    );
  }
}
