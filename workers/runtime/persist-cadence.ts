/**
 * When one partition's engine persists on its owner, timed in the owning process (docs/design.md,
 * "The persist cadence lives in the owning process"):
 * - periodic: every `everyMs` (persistEvery) after the previous periodic persist started — or,
 *   after a recovery, after the first batch was folded, so that the keys that batch created are due
 *   at the first persist instead of a cycle later;
 * - takeover (`commitFirstBatch`): after a recovery, right after the first batch was folded, once —
 *   every key that batch touched, and the input offset past it: the new owner commits at once,
 *   not a `persistEvery` later (a second failover soon after re-reads nothing before it, and the
 *   group's committed offset shows the new owner); the periodic cadence counts from it;
 * - idle: once the fold has caught up with the partition's log end (the high watermark of its
 *   last fetch) and nothing more came for `idleAfterMs` — so at most once per `idleAfterMs`, and
 *   never while records keep coming. The quiet time counts from the last record's timestamp when
 *   that is earlier than its fold: a backlog read up to a log end that has been quiet for
 *   `idleAfterMs` already (its last record is that old) is flushed at once instead of after another
 *   `idleAfterMs` — still at most once per `idleAfterMs`.
 * This cadence alone decides when a partition persists (per-key timers decide which keys a
 * persist takes; the partition workflow's persist activity only reports what the persists
 * landed). Every persist goes through the engine's serialized persist chain, fenced by the
 * generation like any persist.
 */
export interface PersistCadenceOptions {
  /** persistEvery, ms. */
  readonly everyMs: number;
  /** The idle flush's quiet time (FlowDefinition.idleFlushMs); undefined: no idle flush. */
  readonly idleAfterMs: number | undefined;
  /** The engine was just recovered: its first batch is persisted and committed at once (a `takeover` persist). */
  readonly commitFirstBatch?: boolean;
  /** Runs one persist with this `now` (the persist's clock); never rejects (a failure stops the partition elsewhere). */
  readonly persist: (reason: 'periodic' | 'idle' | 'takeover', now: number) => Promise<void>;
  /** The partition may be persisted here now (running, this generation, not stopping). */
  readonly mayPersist: () => boolean;
  readonly now?: () => number;
}

export class PersistCadence {
  private readonly o: PersistCadenceOptions;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private nextAt: number | undefined;
  private running: Promise<void> | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** The first batch after start() without a periodic persist yet moves the cadence's start to it. */
  private awaitingFirstBatch = false;
  /** When the last periodic persist started (the persist's `now`, epoch ms). */
  lastPeriodicAt: number | undefined;
  /** When the last idle flush started (epoch ms). */
  private lastIdleAt: number | undefined;
  /** Reports waiting for the periodic persist whose timer is about to fire (see due). */
  private waiting: Array<() => void> = [];

  constructor(options: PersistCadenceOptions) {
    this.o = options;
    this.now = options.now ?? Date.now;
  }

  /** A fold loop starts driving the partition: the next periodic persist is `everyMs` after the last one (or from now). */
  start(): void {
    const now = this.now();
    this.nextAt = (this.lastPeriodicAt ?? now) + this.o.everyMs;
    this.awaitingFirstBatch = this.lastPeriodicAt === undefined;
    this.rearm();
  }

  /**
   * A batch was folded (up to `position`); `highWatermark`: the log end its fetch reported;
   * `lastTimestamp`: its last record's timestamp (epoch ms, as kafkajs gives it), if known.
   */
  folded(position: number, highWatermark: number | undefined, lastTimestamp?: string): void {
    if (this.awaitingFirstBatch) {
      this.awaitingFirstBatch = false;
      if (this.lastPeriodicAt === undefined) {
        this.nextAt = this.now() + this.o.everyMs;
        if (this.o.commitFirstBatch && this.o.mayPersist()) {
          this.nextAt = this.now();
          void this.runPeriodic('takeover').finally(() => this.release());
        } else {
          this.rearm();
        }
      }
    }
    // Each batch restarts the quiet time: only a partition that stays caught up flushes.
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const after = this.o.idleAfterMs;
    if (after !== undefined && highWatermark !== undefined && position >= highWatermark) {
      this.idleTimer = setTimeout(() => this.idle(), this.quietLeft(after, lastTimestamp));
      this.idleTimer.unref?.();
    }
  }

  /**
   * How long the caught-up partition must stay quiet before its idle flush: `after`, less how long
   * the log end has been quiet already by its last record's timestamp (a record stamped in the
   * future, or none, counts from now) — but never sooner than `after` past the previous idle flush.
   */
  private quietLeft(after: number, lastTimestamp: string | undefined): number {
    const stamped = lastTimestamp === undefined ? Number.NaN : Number(lastTimestamp);
    if (!Number.isFinite(stamped)) return after;
    const now = this.now();
    const left = Math.min(after, Math.max(0, stamped + after - now));
    if (left === after || this.lastIdleAt === undefined) return left;
    return Math.max(left, Math.min(after, this.lastIdleAt + after - now));
  }

  /**
   * The periodic persist a report should wait for: the one running, or — its time come and its
   * timer about to fire — the one that timer starts (resolved at once if it finds the partition
   * not persistable). Undefined when none is due. It never starts a persist itself.
   */
  due(): Promise<void> | undefined {
    if (this.running) return this.running;
    if (this.nextAt === undefined || this.timer === undefined || this.now() < this.nextAt) return undefined;
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** The fold loop stopped, or the engine is replaced or the process stops: no more timed persists. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.timer = undefined;
    this.idleTimer = undefined;
    this.nextAt = undefined;
    this.release();
  }

  /** The reports waiting for the timer's persist go on (it ran, or there is none to run). */
  private release(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  private rearm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.nextAt === undefined || this.running) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, this.nextAt - this.now()));
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = undefined;
    // Not ours to persist any more (revoked, failed, stopping): a new fold loop starts the cadence again.
    if (this.running || this.nextAt === undefined || !this.o.mayPersist()) {
      this.release();
      return;
    }
    const run = this.runPeriodic('periodic');
    void run.finally(() => this.release());
  }

  private runPeriodic(reason: 'periodic' | 'takeover'): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // A timer can fire a little before its time by the wall clock (Node counts it from the event
    // loop's cached time, which lags the clock by the tick that armed it): the persist runs as of
    // its scheduled time at least, so that the keys due then (the first batch's) are due.
    const now = Math.max(this.now(), this.nextAt ?? 0);
    this.lastPeriodicAt = now;
    this.nextAt = now + this.o.everyMs;
    const run = this.o.persist(reason, now).finally(() => {
      this.running = undefined;
      if (this.nextAt !== undefined) this.rearm();
    });
    this.running = run;
    return run;
  }

  private idle(): void {
    this.idleTimer = undefined;
    if (!this.o.mayPersist()) return;
    const now = this.now();
    this.lastIdleAt = now;
    void this.o.persist('idle', now);
  }
}
