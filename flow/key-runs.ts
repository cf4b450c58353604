import { EmitBuffer, type OutputOptions } from './emit';
import type { KeyFlow, QueuedFire, QueuedRecord } from './key-flow';
import type { PendingOutput } from '../core/emitted-outputs';
import type { TimerEdit } from './key-timers';
import type { PoisonReason } from './poison';
import type { RecoveredKey } from './ports';
import type { FlowRecord, InputMessage } from './record';

/** Pipelined mode: a batch returns once at most this many records wait in busy keys' queues (and no key waits for a slot). */
const MAX_QUEUED = 10_000;

function withResolvers(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** What the busy keys' runs do through their partition's fold (PartitionFlow's own steps). */
export interface KeyRunsFold<S, V> {
  /** FlowOptions.asyncConcurrency: unset, batch by batch; a number, pipelined with at most this many keys folding. */
  readonly asyncConcurrency: number | undefined;
  /** The emit context's options (a busy key gets its own context). */
  readonly outputs: OutputOptions | undefined;
  /** The partition has stopped. */
  failed(): boolean;
  /** Stops the partition; returns the error. */
  fail(err: unknown): unknown;
  /** Moves the partition clock to now (before each queued record, as a batch does). */
  tick(): void;
  /** One record into its key; the fold's Promise when it went async. */
  step(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, decodeError: unknown, ctx: EmitBuffer): Promise<S | undefined> | undefined;
  /** A folded record's new state, emits and timer edits (undefined: none) into its key. */
  apply(
    kf: KeyFlow<S, V>,
    next: S | undefined,
    emitted: PendingOutput[] | undefined,
    timers: TimerEdit | undefined,
    record: FlowRecord<V>,
    offset: number,
  ): void;
  /** A record whose fold failed: to the poison handler. */
  poisoned(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, reason: PoisonReason, error: unknown): void;
  /** Adds what was folded and skipped to the metrics. */
  countFolded(): void;
  /** A key left with no state: forgotten if nothing of it is stored or pending. */
  forgetIfNothing(kf: KeyFlow<S, V>): void;
  /** A key timer queued behind the key's records fires in its turn. */
  fireQueued(kf: KeyFlow<S, V>, fire: QueuedFire['fire']): void;
  /** The key's run is over (it folds synchronously again): its event timers the watermark passed meanwhile fire. */
  afterRun(kf: KeyFlow<S, V>): void;
  /** Before a queued record folds: the key's event timers due at the watermark it came with fire. */
  beforeQueued(kf: KeyFlow<S, V>, q: QueuedRecord<V>): void;
  /** Reads an unloaded key back from the store. */
  read(key: string): Promise<RecoveredKey<S, V> | undefined>;
  /** Restores a key read back; a Promise only while a journal's async fold replays. */
  restore(kf: KeyFlow<S, V>, found: RecoveredKey<S, V>): void | Promise<void>;
  /** The keys unloaded with state in the store (a key read back leaves it). */
  readonly unloaded: Set<string>;
}

/**
 * A partition's busy keys — a key whose fold returned a Promise, or that is read back from the
 * store — and the records queued behind them: each busy key's run folds its records in offset
 * order while other keys go on. `asyncConcurrency` unset: the batch being routed waits for its
 * runs (a barrier). Set: at most that many keys fold at once, keys beyond wait for a slot, and a
 * batch returns once none waits (and at most MAX_QUEUED records are queued).
 */
export class KeyRuns<S, V> {
  /** Keys folding asynchronously now (pipelined mode counts them against asyncConcurrency). */
  inFlight = 0;
  /** Records waiting in busy keys' queues. */
  queued = 0;
  /** Barrier mode: what the batch being routed must wait for. */
  private batchWaits: Promise<void>[] | undefined;
  /** Busy keys' runs going on (folds and read-backs), and who waits for none to be left. */
  private runs = 0;
  private drainedWaiters: Array<() => void> = [];
  /** Pipelined mode: busy keys waiting for a free slot, in the order their first record came. */
  private readonly waiting: KeyFlow<S, V>[] = [];
  /** Pipelined mode: resolved when no key waits for a slot any more. */
  private slotsFree: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly f: KeyRunsFold<S, V>) {}

  /** A batch starts routing. */
  beginBatch(): void {
    this.batchWaits = undefined;
  }

  /**
   * The batch is routed: what it must wait for before it returns — its runs (barrier mode), or
   * a free slot (pipelined mode, when keys wait for one or too many records are queued) — if anything.
   */
  endBatch(): Promise<unknown> | undefined {
    const waits = this.batchWaits;
    this.batchWaits = undefined;
    if (waits) return Promise.all(waits).then(() => this.f.countFolded());
    if (this.waiting.length > 0 || this.queued > MAX_QUEUED) {
      this.slotsFree ??= withResolvers();
      return this.slotsFree.promise;
    }
    return undefined;
  }

  /** Pipelined mode: the partition is full; the key waits for a slot with its record first in its queue. */
  wait(kf: KeyFlow<S, V>, first: QueuedRecord<V>): void {
    const x = kf.extras();
    x.queue = [first];
    x.at = first.offset;
    this.queued++;
    this.waiting.push(kf);
  }

  /** A key's fold went async (`pending`): its run settles it, then folds what queues behind it. */
  fold(kf: KeyFlow<S, V>, first: { record: FlowRecord<V>; offset: number; message: InputMessage }, pending: Promise<S | undefined>): void {
    this.started(this.runKey(kf, first, pending));
  }

  /** A record came for an unloaded key: read it back from the store before its records fold (they wait in its queue). */
  readBack(kf: KeyFlow<S, V>): void {
    kf.extras().queue = [];
    const run = (async () => {
      const found = await this.f.read(kf.key);
      if (found) await this.f.restore(kf, found);
      this.f.unloaded.delete(kf.key);
      await this.runKey(kf, undefined, undefined);
    })();
    // A read-back is not a fold: it does not count against asyncConcurrency, but a barrier batch waits for it.
    this.started(run, false);
  }

  /**
   * Resolves once no key is busy (every record handed over is folded, or the partition failed):
   * with asyncConcurrency set, batches return before their async folds end.
   */
  drained(): Promise<void> {
    if (this.runs === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainedWaiters.push(resolve));
  }

  /**
   * Starts a busy key's run: awaited by the batch in barrier mode, failing the partition if it
   * fails; `counted` (a fold, not a read-back) counts it against asyncConcurrency.
   */
  private started(run: Promise<void>, counted = true): void {
    if (counted) this.inFlight++;
    this.runs++;
    const done = run.then(
      () => this.ended(counted),
      (err: unknown) => {
        this.ended(counted);
        throw this.f.fail(err);
      },
    );
    if (this.f.asyncConcurrency === undefined) {
      if (this.batchWaits) this.batchWaits.push(done);
      else this.batchWaits = [done];
    }
    else done.catch(() => undefined); // the failure stops the partition: the next batch (or the runtime's check) sees it
  }

  private ended(counted: boolean): void {
    if (counted) this.inFlight--;
    this.runs--;
    this.f.countFolded();
    const limit = this.f.asyncConcurrency;
    while (limit !== undefined && this.inFlight < limit && this.waiting.length > 0 && !this.f.failed()) {
      const kf = this.waiting.shift()!;
      this.started(this.runKey(kf, undefined, undefined));
    }
    this.releaseBatch();
    if (this.runs === 0 && this.drainedWaiters.length > 0) for (const resolve of this.drainedWaiters.splice(0)) resolve();
  }

  /** Pipelined mode: the batch waiting for room may go (or must see the failure). */
  private releaseBatch(): void {
    const free = this.slotsFree;
    if (free && (this.f.failed() || (this.waiting.length === 0 && this.queued <= MAX_QUEUED))) {
      this.slotsFree = undefined;
      free.resolve();
    }
  }

  /**
   * A busy key's run: settles the fold that went async (if any), then folds its queued records in
   * order (each one sync or async), until the queue is empty and the key is idle again.
   */
  private async runKey(kf: KeyFlow<S, V>, first: { record: FlowRecord<V>; offset: number; message: InputMessage } | undefined, pending: Promise<S | undefined> | undefined): Promise<void> {
    const f = this.f;
    const x = kf.extras();
    x.emits ??= new EmitBuffer(f.outputs);
    x.queue ??= [];
    const ctx = x.emits;
    const queue = x.queue;
    let i = 0;
    try {
      if (first && pending) await this.settle(kf, first.record, first.offset, first.message, pending, ctx);
      // Records keep coming into the queue while it is worked off (later batches, pipelined mode).
      for (; i < queue.length; i++) {
        if (f.failed()) return;
        const q = queue[i]!;
        f.tick();
        if ('fire' in q) {
          f.fireQueued(kf, q.fire);
        } else {
          x.at = q.offset;
          f.beforeQueued(kf, q);
          const next = f.step(kf, q.record, q.offset, q.message, q.decodeError, ctx);
          if (next !== undefined) await this.settle(kf, q.record, q.offset, q.message, next, ctx);
        }
        this.queued--;
        if (i >= 1023) {
          queue.splice(0, i + 1); // a hot key's queue must not keep what it has folded
          i = -1;
        }
        if (this.slotsFree) this.releaseBatch();
      }
    } finally {
      this.queued -= queue.length - i; // what a failure left unfolded (none otherwise)
      x.queue = undefined;
      x.emits = undefined;
      x.at = undefined;
      kf.tidy();
      if (!f.failed()) f.afterRun(kf);
      if (!kf.hasState) f.forgetIfNothing(kf);
    }
  }

  private async settle(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, pending: Promise<S | undefined>, ctx: EmitBuffer): Promise<void> {
    let next: S | undefined;
    try {
      next = await pending;
    } catch (err) {
      ctx.discard();
      this.f.poisoned(kf, record, offset, message, 'fold', err);
      return;
    }
    this.f.apply(kf, next, ctx.take(), ctx.takeTimers(), record, offset);
  }
}
