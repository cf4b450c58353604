import { isLazySnapshot, type PartitionPersistence, type RecoveredKey, type WriteBatchResult } from './ports';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import { type PersistenceMode, persistsJournal, persistsSnapshots } from '../core/persistence-types';
import { type Clock, systemClock } from './clock';
import { CommitBound } from './commit-bound';
import type { Codec } from '../core/codec/codec';
import { DecodeError } from '../core/codec/errors';
import { EmitBuffer, type OutputOptions } from './emit';
import type { DecodeFailurePolicy } from './decode-policy';
import { FoldError, OffsetCommitFailedError, PartitionStateError, PersistFailedError } from './errors';
import { type Fold, isPromise } from './fold';
import { KeyFlow } from './key-flow';
import { type Logger, silentLogger } from '../core/logger';
import { FlowMetrics, type PartitionMetrics } from './metrics';
import { formatOffset, parseOffset } from './offsets';
import { deadLetter, type OutputRecord, type PoisonPolicy, type PoisonReason } from './poison';
import type { FlowRecord, InputMessage, RecordHeaders } from './record';
import { firstTimerAt, onTimer, type TimerPolicy, timerPolicy } from './timers';

/**
 * Why a persist runs. `periodic`: the keys whose timers are due (the workflow's persistEvery timer).
 * `outputs`: the keys with pending outputs (emitted records, dead letters), at least every
 * `outputEvery` (the owning process's flush, see README design notes); fails like `periodic`.
 * `idle`: every dirty key, at once — the partition has caught up with its log end (the owning
 * process's idle flush, see README design notes); fails like `periodic`; a transient flow writes
 * nothing and lets its commit pass nothing (as `periodic`).
 * `revoke`: every dirty key if a timer asked for flushOnRevoke, otherwise only pending deletes.
 * `shutdown`: every dirty key ("persist now"). Revoke and shutdown never throw for a failed write:
 * the failure is counted and the keys concerned keep holding their offsets.
 */
export type PersistReason = 'periodic' | 'outputs' | 'idle' | 'revoke' | 'shutdown';

export interface PersistResult {
  /** The offset committed by this run, if it committed one. */
  readonly committed: string | undefined;
  /** Key writes that landed (snapshots, journals, delete markers and purges). */
  readonly written: number;
  /** Of those, delete markers and purges. */
  readonly deleted?: number;
  /** Dead letters that landed with these writes. */
  readonly deadLetters?: number;
  /** Emitted records (ctx.emit) that landed with these writes. */
  readonly outputs?: number;
  /** Key writes that failed or were refused. */
  readonly failed: number;
  /** Keys unloaded from memory. */
  readonly evicted: number;
  /** This owner was fenced: the partition is stopped. */
  readonly fenced: boolean;
}

export interface PartitionFlowOptions<S, V> {
  /** The flow's name (metrics and logs). */
  readonly flow: string;
  readonly topic: string;
  readonly partition: number;
  /** The committed offset when the partition was assigned: the next offset to consume. */
  readonly assignedAt: string;
  readonly fold: Fold<S, V>;
  readonly codec: Codec<V>;
  readonly persistence: PartitionPersistence<S, V>;
  readonly mode: PersistenceMode;
  readonly timers?: TimerPolicy;
  /** Record-level filter, after remapKey and before the key is looked up (kafka-flow FilterRecord). */
  readonly filter?: (record: FlowRecord<V>) => boolean;
  /** Derives the key a record is folded under (kafka-flow RemapKey), before filter and fold. */
  readonly remapKey?: (key: string, record: FlowRecord<V>) => string;
  readonly onDecodeFailure?: DecodeFailurePolicy;
  /** What to do when the fold throws for a record. Default 'fail'. */
  readonly onFoldFailure?: PoisonPolicy;
  /** Where this partition's dead letters go (needed by the `dead-letter` policies). */
  readonly deadLetterTopic?: string;
  /** The topics the fold may emit to and the encoder of emitted values (without: ctx.emit throws). */
  readonly outputs?: OutputOptions;
  /** Keys with pending outputs are due for an `outputs` persist this long after the first of them was emitted. Default 1 s. */
  readonly outputEvery?: number;
  /**
   * The partition's bound on outputs (emitted records and dead letters) held until they land:
   * once reached, `outputsFull()` says so and outputs are due at once — the owner persists them
   * and folds nothing more until that made room. Unset: no bound.
   */
  readonly maxPendingOutputs?: number;
  /**
   * Async folds (see FlowOptions.asyncConcurrency). Unset: batch by batch — a batch returns once
   * every record of it is folded, its keys folding concurrently. A number: pipelined — at most this
   * many keys fold asynchronously at once (their records in order), and a batch returns as soon as
   * no key waits for a free slot, so later batches start while earlier keys still fold.
   */
  readonly asyncConcurrency?: number;
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly metrics?: FlowMetrics;
}

const NO_HEADERS: RecordHeaders = Object.freeze({});

/** Pipelined mode: a batch returns once at most this many records wait in busy keys' queues (and no key waits for a slot). */
const MAX_QUEUED = 10_000;

function withResolvers(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * One key write in flight, and what to do with the key when it lands. `put`: its state;
 * `delete`: its delete marker (the fold returned no state); `purge`: the marker goes, the
 * committed offset having passed it.
 */
interface Planned<S, V> {
  readonly kf: KeyFlow<S, V>;
  readonly oldHold: number;
  /** What a put holds once landed: the persist's captured position, or a folding key's first record not folded yet. */
  readonly holdAfter: number;
  readonly kind: 'put' | 'delete' | 'purge';
  readonly events: FlowRecord<V>[] | undefined;
  readonly outputs: OutputRecord[] | undefined;
}

/** What one persist writes, and the smallest hold among the keys it leaves alone. */
interface PersistPlan<S, V> {
  readonly planned: Planned<S, V>[];
  readonly othersMin: number;
  /** Keys unloaded while planning (nothing to write). */
  readonly evicted: number;
}

/** What a persist's writes came to. */
interface PersistTally {
  written: number;
  deletes: number;
  deadLetters: number;
  outputs: number;
  failed: number;
  evicted: number;
  fenced: boolean;
  error: unknown;
  conflicts: string[];
  committedNow: number | undefined;
  commitError: unknown;
}

/**
 * One input partition: routes each batch's records to their keys, folds them, and persists keys
 * and commits the offset when asked. Pure with respect to I/O: it reads and writes only through
 * the PartitionPersistence it was given.
 *
 * Call `recover()` once (unless the flow is transient), then `handleBatch` per batch (awaiting it
 * if it returns a Promise), `triggerTimers` every so often (a second, say) and `persist` when the
 * workflow's persistEvery timer fires or on revoke/shutdown.
 *
 * Records are folded as they are routed, in offset order: a synchronous fold never queues. A key
 * whose fold returns a Promise (or that must first be read back from the store) becomes busy: its
 * later records wait in its queue and fold in order once it is done, while other keys go on.
 * `asyncConcurrency` decides how batches and busy keys interleave (see PartitionFlowOptions).
 */
export class PartitionFlow<S, V> {
  readonly topic: string;
  readonly partition: number;
  private readonly o: PartitionFlowOptions<S, V>;
  private readonly policy: TimerPolicy;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly m: PartitionMetrics;
  private readonly journaling: boolean;
  private readonly snapshotting: boolean;
  /** Keys keep their clocks relative to this (small integers, not boxed doubles). */
  private readonly epoch: number;

  private readonly keys = new Map<string, KeyFlow<S, V>>();
  /** Keys unloaded from memory with state in the store: read again when a record comes for them. */
  private readonly unloaded = new Set<string>();
  /** Keys with a write in flight: if they finish meanwhile, their stored state must still be deleted. */
  private readonly writing = new Set<KeyFlow<S, V>>();

  private nextOffset: number;
  private committed: number;
  private recovered = false;
  private persistChain: Promise<unknown> = Promise.resolve();
  private failure: unknown;
  /** When the oldest pending output (of any key) was folded, if any is pending (clock ms). */
  private outputsPendingSince: number | undefined;
  /** Outputs emitted (or dead-lettered) and not landed yet: on their keys, or in a write in flight. */
  private heldOutputs = 0;

  /** The fold context of synchronous folds (a key whose fold goes async takes it over). */
  private ctx: EmitBuffer;
  /** The partition clock of the batch being routed. */
  private rel = 0;
  /** Counted as records are folded; added to the metrics once per batch or async run. */
  private applied = 0;
  private skipped = 0;
  /** The batch returned a Promise that has not settled yet. */
  private batchPending = false;
  /** Barrier mode (asyncConcurrency unset): what the batch being routed must wait for. */
  private batchWaits: Promise<void>[] | undefined;
  /** Keys folding asynchronously now (pipelined mode counts them against asyncConcurrency). */
  private inFlight = 0;
  /** Busy keys' runs going on (folds and read-backs), and who waits for none to be left. */
  private runs = 0;
  private drainedWaiters: Array<() => void> = [];
  /** Pipelined mode: busy keys waiting for a free slot, in the order their first record came. */
  private readonly waiting: KeyFlow<S, V>[] = [];
  /** Records waiting in busy keys' queues. */
  private queued = 0;
  /** Pipelined mode: resolved when no key waits for a slot any more. */
  private slotsFree: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(options: PartitionFlowOptions<S, V>) {
    this.o = options;
    this.topic = options.topic;
    this.partition = options.partition;
    this.policy = options.timers ?? timerPolicy({ persistPeriodically: {} });
    this.clock = options.clock ?? systemClock;
    this.epoch = this.clock.now();
    this.log = options.logger ?? silentLogger;
    this.m = (options.metrics ?? FlowMetrics.of()).forPartition(options.flow, options.topic, options.partition);
    this.journaling = persistsJournal(options.mode);
    this.snapshotting = persistsSnapshots(options.mode);
    this.nextOffset = parseOffset(options.assignedAt);
    this.committed = this.nextOffset;
    this.ctx = new EmitBuffer(options.outputs);
    if (options.mode === 'none') this.recovered = true;
    if ((options.onDecodeFailure === 'dead-letter' || options.onFoldFailure === 'dead-letter') && !options.deadLetterTopic) {
      throw new PartitionStateError('the dead-letter policy needs a deadLetterTopic');
    }
    const c = options.asyncConcurrency;
    if (c !== undefined && !(Number.isInteger(c) && c >= 1)) throw new PartitionStateError(`asyncConcurrency must be a positive integer, got ${c}`);
    const max = options.maxPendingOutputs;
    if (max !== undefined && !(Number.isInteger(max) && max >= 1)) throw new PartitionStateError(`maxPendingOutputs must be a positive integer, got ${max}`);
  }

  private onPoison(kf: KeyFlow<S, V>, record: FlowRecord<V>, reason: PoisonReason, error: unknown, message: InputMessage): 'skipped' | 'dead-lettered' {
    const policy = (reason === 'decode' ? this.o.onDecodeFailure : this.o.onFoldFailure) ?? 'fail';
    const typed = reason === 'fold' ? new FoldError(this.topic, this.partition, record.key, record.offset, error) : error;
    if (reason === 'fold') this.m.foldFailures(policy).inc();
    if (policy === 'fail') throw this.fail(typed);
    if (policy === 'skip') {
      this.log.warn({ topic: this.topic, partition: this.partition, offset: record.offset, reason, err: typed }, 'skipped a poison record');
      return 'skipped';
    }
    // Persisted (past the record) with its dead letter at the next persist.
    this.addOutputs(kf, [deadLetter(message, { flow: this.o.flow, topic: this.topic, partition: this.partition, deadLetterTopic: this.o.deadLetterTopic! }, reason, typed)]);
    this.log.warn({ topic: this.topic, partition: this.partition, offset: record.offset, reason, deadLetterTopic: this.o.deadLetterTopic }, 'dead-lettering a poison record');
    return 'dead-lettered';
  }

  /** Reads every persisted key of the partition into memory. Call once, before the first batch. */
  async recover(): Promise<number> {
    this.ensureHealthy();
    if (this.recovered && this.o.mode !== 'none') throw new PartitionStateError('recover() was already called');
    let count = 0;
    const created = this.clock.now() - this.epoch;
    for await (const found of this.o.persistence.recover()) {
      const kf = new KeyFlow<S, V>(found.key, created, this.committed, this.journaling);
      // A snapshot or a marker restores at once; only a journal's replay may await (one await per key is 100,000 microtasks).
      const replaying = this.restore(kf, found);
      if (replaying) await replaying;
      this.registerFirstTimer(kf);
      this.keys.set(found.key, kf);
      count++;
    }
    this.recovered = true;
    this.m.keysLive.set(this.keys.size);
    this.log.info({ topic: this.topic, partition: this.partition, keys: count }, 'partition recovered');
    return count;
  }

  /**
   * Folds one batch (kafkajs messages of this partition, in offset order). Returns a Promise only
   * when it has to wait: an async fold or a key read back from the store — until every record of
   * the batch is folded (asyncConcurrency unset), or until no busy key waits for a slot
   * (asyncConcurrency set: keys still folding go on while the next batch comes).
   */
  handleBatch(messages: readonly InputMessage[]): void | Promise<void> {
    this.ensureHealthy();
    if (!this.recovered) throw new PartitionStateError('recover() must complete before the first batch');
    if (this.batchPending) throw new PartitionStateError('handleBatch called before the previous batch finished');
    if (messages.length === 0) return;
    const { topic, partition, o } = this;
    const { codec, filter, remapKey } = o;
    const policy = o.onDecodeFailure ?? 'fail';
    this.rel = this.clock.now() - this.epoch;
    this.batchWaits = undefined;
    let keyless = 0;
    let lastOffset = -1;

    try {
      for (let i = 0; i < messages.length; i++) {
        const m = messages[i]!;
        const offset = parseOffset(m.offset);
        lastOffset = offset;
        const rawKey = m.key;
        if (rawKey === null || rawKey === undefined) {
          keyless++;
          continue;
        }
        let key = typeof rawKey === 'string' ? rawKey : rawKey.toString('utf8');
        let value: V;
        if (m.value === null || m.value === undefined) {
          value = null as V;
        } else {
          try {
            value = codec.decode(m.value);
          } catch (cause) {
            const error = new DecodeError({ topic, partition, key, offset: m.offset }, cause);
            this.m.decodeFailures(policy).inc();
            if (policy === 'fail') throw this.fail(error);
            if (policy === 'dead-letter') {
              // In its key's turn (records before it fold first), with the key's next write.
              const record: FlowRecord<V> = { topic, partition, offset: m.offset, key, value: null as V, timestamp: m.timestamp, headers: m.headers ?? NO_HEADERS };
              this.route(this.keyFor(key, offset), record, offset, m, error);
            } else {
              this.log.warn({ topic, partition, offset: m.offset, err: error }, 'skipped an undecodable record');
            }
            continue;
          }
        }
        let record: FlowRecord<V> = { topic, partition, offset: m.offset, key, value, timestamp: m.timestamp, headers: m.headers ?? NO_HEADERS };
        if (remapKey) {
          const remapped = remapKey(key, record);
          if (remapped !== key) {
            key = remapped;
            record = { ...record, key };
          }
        }
        if (filter && !filter(record)) continue;
        this.route(this.keyFor(key, offset), record, offset, m, undefined);
      }
    } catch (err) {
      throw this.fail(err);
    }

    // Routed is handled, as far as offsets go: a busy key holds the offset of its first waiting record.
    if (lastOffset + 1 > this.nextOffset) this.nextOffset = lastOffset + 1;
    if (keyless > 0) this.m.keylessDropped.inc(keyless);
    this.countFolded();

    const waits = this.batchWaits;
    this.batchWaits = undefined;
    if (waits) return this.awaitBatch(Promise.all(waits).then(() => this.countFolded()));
    if (this.waiting.length > 0 || this.queued > MAX_QUEUED) {
      this.slotsFree ??= withResolvers();
      return this.awaitBatch(this.slotsFree.promise);
    }
  }

  private async awaitBatch(done: Promise<unknown>): Promise<void> {
    this.batchPending = true;
    try {
      await done;
    } finally {
      this.batchPending = false;
    }
    this.ensureHealthy();
  }

  /** The key a record goes to: created when new (with its first timer), and read back first if it was unloaded. */
  private keyFor(key: string, offset: number): KeyFlow<S, V> {
    let kf = this.keys.get(key);
    if (kf === undefined) {
      kf = new KeyFlow<S, V>(key, this.rel, offset, this.journaling);
      this.registerFirstTimer(kf);
      this.keys.set(key, kf);
      if (this.unloaded.has(key)) this.readBack(kf);
    }
    // A key that held nothing (a delete marker waiting for its purge) holds from its next record.
    if (kf.holding === undefined) kf.holding = offset;
    return kf;
  }

  /** Folds the record now, or queues it behind the key's async fold (or read-back), or behind the busy keys of a full partition. */
  private route(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, decodeError: unknown): void {
    const queue = kf.x?.queue;
    if (queue !== undefined) {
      queue.push({ record, offset, message, decodeError });
      this.queued++;
      return;
    }
    const limit = this.o.asyncConcurrency;
    if (limit !== undefined && this.inFlight >= limit) {
      const x = kf.extras();
      x.queue = [{ record, offset, message, decodeError }];
      x.at = offset;
      this.queued++;
      this.waiting.push(kf);
      return;
    }
    const pending = this.step(kf, record, offset, message, decodeError, this.ctx);
    if (pending === undefined) {
      if (!kf.hasState) this.forgetIfNothing(kf);
      return;
    }
    // The fold went async: the key takes the fold context the fold was given, the partition a new one.
    const x = kf.extras();
    x.emits = this.ctx;
    this.ctx = new EmitBuffer(this.o.outputs);
    x.queue = [];
    x.at = offset;
    this.started(this.runKey(kf, { record, offset, message }, pending));
  }

  /**
   * One record into its key: skipped if at or below the key's last offset, to the poison handler if
   * undecodable or the fold throws, else folded. Returns the fold's Promise when it went async
   * (the caller settles it with `settle`).
   */
  private step(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, decodeError: unknown, ctx: EmitBuffer): Promise<S | undefined> | undefined {
    kf.touchedClock = this.rel;
    kf.touchedOffset = offset;
    if (offset <= kf.lastOffset) {
      this.skipped++;
      return undefined;
    }
    // A recovered state not decoded yet is decoded before the key's first record past its
    // snapshot: a CorruptSnapshotError stops the partition here, before the record is taken.
    if (kf.lazy) kf.decode();
    if (decodeError !== undefined) {
      this.poisoned(kf, record, offset, message, 'decode', decodeError);
      return undefined;
    }
    let next: S | undefined | Promise<S | undefined>;
    ctx.begin(record);
    try {
      next = this.o.fold(kf.state, record, ctx);
    } catch (err) {
      ctx.discard(); // a failed record's emits go with it
      this.poisoned(kf, record, offset, message, 'fold', err);
      return undefined;
    }
    if (isPromise(next)) return next;
    this.apply(kf, next, ctx.take(), record, offset);
    return undefined;
  }

  private apply(kf: KeyFlow<S, V>, next: S | undefined, emitted: OutputRecord[] | undefined, record: FlowRecord<V>, offset: number): void {
    // A record that emitted is written even if the state is unchanged: the snapshot's offset
    // must pass it, or a replay would emit again.
    if (emitted) {
      this.addOutputs(kf, emitted);
      kf.markChanged();
    } else if (next !== kf.state) {
      kf.markChanged();
    }
    const events = kf.x?.events;
    if (events) events.push(record);
    kf.state = next;
    kf.lastOffset = offset;
    this.applied++;
  }

  /** A poisoned record: the handler skips it, dead-letters it, or throws (the partition stops). */
  private poisoned(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, reason: PoisonReason, error: unknown): void {
    this.skipped++;
    if (this.onPoison(kf, record, reason, error, message) === 'dead-lettered') kf.markChanged();
    kf.lastOffset = offset; // taken: a replay of this key skips it
  }

  private addOutputs(kf: KeyFlow<S, V>, outputs: readonly OutputRecord[]): void {
    kf.addOutputs(outputs);
    this.heldOutputs += outputs.length;
    this.outputsPendingSince ??= this.clock.now();
  }

  /**
   * A key whose fold returned no state and never had one since it was last written is forgotten at
   * once (a replay folds its records to no state again). One that had a state keeps holding until
   * its delete marker lands (a replay from its middle would differ), unless nothing is persisted
   * at all (transient).
   */
  private forgetIfNothing(kf: KeyFlow<S, V>): void {
    if (!kf.hasState && !kf.stored && !kf.busy && !this.writing.has(kf) && (!kf.dirty || this.o.mode === 'none')) this.keys.delete(kf.key);
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
        throw this.fail(err);
      },
    );
    if (this.o.asyncConcurrency === undefined) {
      if (this.batchWaits) this.batchWaits.push(done);
      else this.batchWaits = [done];
    }
    else done.catch(() => undefined); // the failure stops the partition: the next batch (or the runtime's check) sees it
  }

  private ended(counted: boolean): void {
    if (counted) this.inFlight--;
    this.runs--;
    this.countFolded();
    const limit = this.o.asyncConcurrency;
    while (limit !== undefined && this.inFlight < limit && this.waiting.length > 0 && this.failure === undefined) {
      const kf = this.waiting.shift()!;
      this.started(this.runKey(kf, undefined, undefined));
    }
    this.releaseBatch();
    if (this.runs === 0 && this.drainedWaiters.length > 0) for (const resolve of this.drainedWaiters.splice(0)) resolve();
  }

  /**
   * Resolves once no key is busy (every record handed over is folded, or the partition failed):
   * with asyncConcurrency set, batches return before their async folds end.
   */
  drained(): Promise<void> {
    if (this.runs === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainedWaiters.push(resolve));
  }

  /** Pipelined mode: the batch waiting for room may go (or must see the failure). */
  private releaseBatch(): void {
    const free = this.slotsFree;
    if (free && (this.failure !== undefined || (this.waiting.length === 0 && this.queued <= MAX_QUEUED))) {
      this.slotsFree = undefined;
      free.resolve();
    }
  }

  /**
   * A busy key's run: settles the fold that went async (if any), then folds its queued records in
   * order (each one sync or async), until the queue is empty and the key is idle again.
   */
  private async runKey(kf: KeyFlow<S, V>, first: { record: FlowRecord<V>; offset: number; message: InputMessage } | undefined, pending: Promise<S | undefined> | undefined): Promise<void> {
    const x = kf.extras();
    x.emits ??= new EmitBuffer(this.o.outputs);
    x.queue ??= [];
    const ctx = x.emits;
    const queue = x.queue;
    let i = 0;
    try {
      if (first && pending) await this.settle(kf, first.record, first.offset, first.message, pending, ctx);
      // Records keep coming into the queue while it is worked off (later batches, pipelined mode).
      for (; i < queue.length; i++) {
        if (this.failure !== undefined) return;
        const q = queue[i]!;
        x.at = q.offset;
        this.rel = this.clock.now() - this.epoch;
        const next = this.step(kf, q.record, q.offset, q.message, q.decodeError, ctx);
        if (next !== undefined) await this.settle(kf, q.record, q.offset, q.message, next, ctx);
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
      if (!kf.hasState) this.forgetIfNothing(kf);
    }
  }

  private async settle(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, pending: Promise<S | undefined>, ctx: EmitBuffer): Promise<void> {
    let next: S | undefined;
    try {
      next = await pending;
    } catch (err) {
      ctx.discard();
      this.poisoned(kf, record, offset, message, 'fold', err);
      return;
    }
    this.apply(kf, next, ctx.take(), record, offset);
  }

  /** A record came for an unloaded key: read it back from the store before its records fold (they wait in its queue). */
  private readBack(kf: KeyFlow<S, V>): void {
    kf.extras().queue = [];
    const run = (async () => {
      const found = await this.o.persistence.read(kf.key);
      if (found) await this.restore(kf, found);
      this.unloaded.delete(kf.key);
      await this.runKey(kf, undefined, undefined);
    })();
    // A read-back is not a fold: it does not count against asyncConcurrency, but a barrier batch waits for it.
    this.started(run, false);
  }

  /** Adds what was folded and skipped since the last call to the metrics. */
  private countFolded(): void {
    if (this.applied > 0) this.m.recordsFolded.inc(this.applied);
    if (this.skipped > 0) this.m.recordsSkipped.inc(this.skipped);
    this.applied = 0;
    this.skipped = 0;
    this.m.keysLive.set(this.keys.size);
  }

  /**
   * Runs the per-key timers that are due at `now` (kafka-flow's triggerTimers): marks keys to
   * persist, and orphans to persist and unload, at the next `persist`.
   */
  triggerTimers(now: number = this.clock.now()): void {
    this.ensureHealthy();
    const rel = now - this.epoch;
    const offset = this.nextOffset;
    for (const kf of this.keys.values()) {
      const at = kf.timerAt;
      if (at === undefined || at > rel || !kf.hasState) continue;
      kf.timerAt = undefined;
      const decision = onTimer(this.policy, kf, rel, offset);
      if (decision.persist) kf.due = true;
      if (decision.unload) kf.unload = true;
      if (decision.registerAt !== undefined) kf.timerAt = decision.registerAt;
    }
  }

  /**
   * Persists keys (see PersistReason) in batches of the backend's maxWritesPerBatch, each carrying
   * the highest offset it is safe to commit once it lands, then commits what is left to commit.
   * Persists run one at a time, in call order.
   */
  persist(now: number = this.clock.now(), reason: PersistReason = 'periodic'): Promise<PersistResult> {
    const run = this.persistChain.then(() => this.persistNow(now, reason));
    this.persistChain = run.catch(() => undefined);
    return run;
  }

  /**
   * Some key has had outputs pending for `outputEvery` or longer: the owner should run an
   * `outputs` persist now (so outputs land within outputEvery of their record, whatever persistEvery).
   */
  outputsDue(now: number = this.clock.now()): boolean {
    const since = this.outputsPendingSince;
    if (since === undefined || this.failure !== undefined) return false;
    const max = this.o.maxPendingOutputs;
    // At half the bound a persist starts while folding goes on: the fold waits at the bound only
    // when outputs come faster than persists land them, not once per bound's worth of outputs.
    return now >= since + (this.o.outputEvery ?? 1000) || (max !== undefined && this.heldOutputs >= max / 2);
  }

  /**
   * The partition holds `maxPendingOutputs` outputs or more (emitted records and dead letters not
   * landed yet): the owner should run an `outputs` persist at once and fold nothing more until
   * it has made room (workers/flow-runtime.ts). Never true for a stopped partition.
   */
  outputsFull(): boolean {
    const max = this.o.maxPendingOutputs;
    return max !== undefined && this.heldOutputs >= max && this.failure === undefined;
  }

  /** Outputs emitted (or dead-lettered) and not landed yet: held on their keys, or in a write in flight. */
  get pendingOutputs(): number {
    return this.heldOutputs;
  }

  /** The offset it is safe to commit if it moved past the last commit, else undefined. */
  offsetToCommit(): string | undefined {
    const c = this.committable();
    return c > this.committed ? formatOffset(c) : undefined;
  }

  /** The last committed offset (the assigned offset until this flow commits). */
  get committedOffset(): string {
    return formatOffset(this.committed);
  }

  /** One past the last offset handled. */
  get position(): string {
    return formatOffset(this.nextOffset);
  }

  get liveKeys(): number {
    return this.keys.size;
  }

  /** Why this partition stopped, if it did. */
  get failed(): unknown {
    return this.failure;
  }

  /**
   * The key's in-memory state (undefined if unknown, unloaded or deleted). A recovered state not
   * decoded yet is decoded here: if it cannot be, the partition stops with the CorruptSnapshotError.
   */
  stateOf(key: string): S | undefined {
    const kf = this.keys.get(key);
    if (kf?.lazy) this.decodeOrFail(kf);
    return kf?.state;
  }

  /** The offset a key holds back from commit, if it is in memory. */
  holdingOf(key: string): string | undefined {
    const h = this.keys.get(key)?.holding;
    return h === undefined ? undefined : formatOffset(h);
  }

  /** Live keys and their states. */
  *states(): IterableIterator<[string, S]> {
    for (const [key, kf] of this.keys) {
      if (!kf.hasState) continue;
      if (kf.lazy) this.decodeOrFail(kf);
      yield [key, kf.state as S];
    }
  }

  private committable(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const kf of this.keys.values()) if (kf.holding !== undefined && kf.holding < min) min = kf.holding;
    return min === Number.POSITIVE_INFINITY ? this.nextOffset : min;
  }

  /** One persist: choose the keys, write them in chunks with the offsets safe to commit, then apply the error policy. */
  private async persistNow(now: number, reason: PersistReason): Promise<PersistResult> {
    this.ensureHealthy();
    const started = performance.now();
    const strict = timed(reason) && !this.policy.ignorePersistErrors;
    const capturedNext = this.nextOffset;
    const plan = this.planPersist(now, reason, capturedNext);
    let tally: PersistTally;
    try {
      tally = await this.writePlanned(plan, now, capturedNext, strict);
    } finally {
      this.notePendingOutputs(now);
    }
    const stopped = this.applyErrorPolicy(tally, reason, strict);
    if (stopped) return stopped;
    const fenced = await this.commitCommittable(tally, reason, strict);
    if (fenced) return fenced;

    this.m.persists(reason, tally.failed > 0 ? 'failed' : 'ok').inc();
    this.m.persistDuration(reason).observe((performance.now() - started) / 1000);
    if (tally.evicted > 0) this.m.keysEvicted.inc(tally.evicted);
    this.m.keysLive.set(this.keys.size);
    return {
      committed: tally.committedNow === undefined ? undefined : formatOffset(tally.committedNow),
      written: tally.written,
      deleted: tally.deletes,
      deadLetters: tally.deadLetters,
      outputs: tally.outputs,
      failed: tally.failed,
      evicted: tally.evicted,
      fenced: false,
    };
  }

  /** After a persist's writes: outputs still pending (failed writes, records folded meanwhile) are due again from `now`. */
  private notePendingOutputs(now: number): void {
    if (this.outputsPendingSince === undefined) return;
    this.outputsPendingSince = undefined;
    for (const kf of this.keys.values()) {
      const outputs = kf.x?.outputs;
      if (outputs !== undefined && outputs.length > 0) {
        this.outputsPendingSince = now;
        return;
      }
    }
  }

  /**
   * The keys this persist writes (in `planned`), and the smallest hold among those it leaves alone
   * (`othersMin`). Keys with nothing to write are marked persisted (or unloaded) right here.
   */
  private planPersist(now: number, reason: PersistReason, capturedNext: number): PersistPlan<S, V> {
    const transient = this.o.mode === 'none';
    // A transient flow has nothing to write: "flushing" it only lets the commit pass its keys
    // (kafka-flow's no-op flush), so it does that only when asked to flush on revoke.
    const everything =
      reason === 'periodic' ? false : reason === 'shutdown' && !transient ? true : this.policy.flushOnRevoke;
    const planned: Planned<S, V>[] = [];
    const deleted: KeyFlow<S, V>[] = [];
    let othersMin = Number.POSITIVE_INFINITY;
    let evicted = 0;
    // A periodic persist also takes every key whose persistEvery has passed, not only those a
    // timer has marked since: a key's timer and the workflow's persist run on their own clocks, and
    // waiting for the next timer would leave such a key (and the committed offset) a cycle behind.
    const every = this.policy.persistEvery;
    const persistedBefore = every === undefined ? Number.NEGATIVE_INFINITY : now - this.epoch - every;

    for (const kf of [...this.keys.values()]) {
      const hold = kf.holding ?? Number.POSITIVE_INFINITY;
      // A key still folding (an async fold) is written as of its last folded record, and then
      // holds its first record not folded yet; one being read back, or deleted, waits.
      const unfolded = kf.x?.at;
      const busy = kf.busy;
      if (this.writing.has(kf) || (busy && (unfolded === undefined || !kf.hasState))) {
        othersMin = Math.min(othersMin, hold);
        continue;
      }
      const holdAfter = busy ? unfolded! : capturedNext;
      if (!kf.hasState) {
        if (kf.dirty) {
          // Deleted by the fold since the last write: a delete marker, or less (decided below).
          deleted.push(kf);
        } else if (kf.stored && this.committed > kf.lastOffset) {
          // No replay can start at or below the marker any more: purge it.
          kf.beginWrite();
          planned.push({ kf, oldHold: hold, holdAfter: capturedNext, kind: 'purge', events: undefined, outputs: undefined });
        } else {
          // The marker stands for everything this key has seen: it holds nothing.
          kf.holding = undefined;
          if (!kf.stored) this.keys.delete(kf.key);
        }
        continue;
      }
      const selected =
        reason === 'periodic'
          ? kf.due || kf.unload || kf.flushedClock <= persistedBefore
          : reason === 'outputs'
            ? kf.outputs !== undefined && kf.outputs.length > 0
            : reason === 'idle' || everything;
      if (!selected || (transient && !kf.unload && (reason === 'periodic' || reason === 'idle'))) {
        othersMin = Math.min(othersMin, hold);
        continue;
      }
      if (transient || !kf.dirty) {
        // Nothing to write: everything before `holdAfter` is already persisted for this key
        // (or, transient, never will be: kafka-flow's no-op flush).
        kf.due = false;
        this.markPersisted(kf, now, holdAfter);
        if (kf.unload && !busy) {
          this.evict(kf);
          evicted++;
        } else {
          othersMin = Math.min(othersMin, holdAfter);
        }
        continue;
      }
      kf.beginWrite();
      planned.push({ kf, oldHold: hold, holdAfter, kind: 'put', events: this.takeEvents(kf), outputs: takeOutputs(kf) });
    }
    this.planDeletes(deleted, planned, othersMin, capturedNext);
    return { planned, othersMin, evicted };
  }

  /**
   * Writes the planned keys in chunks of `maxWritesPerBatch`, each with the offset safe to commit
   * if it lands (CommitBound). Stops at a fence, and under the strict policy at the first failure.
   */
  private async writePlanned(plan: PersistPlan<S, V>, now: number, capturedNext: number, strict: boolean): Promise<PersistTally> {
    const { planned } = plan;
    const t: PersistTally = { written: 0, deletes: 0, deadLetters: 0, outputs: 0, failed: 0, evicted: plan.evicted, fenced: false, error: undefined, conflicts: [], committedNow: undefined, commitError: undefined };
    const bound = new CommitBound(
      planned.map((p) => p.oldHold),
      plan.othersMin,
      capturedNext,
    );
    const size = Math.max(1, this.o.persistence.maxWritesPerBatch);
    let attempted = 0;
    for (let from = 0; from < planned.length; from += size) {
      const chunk = planned.slice(from, from + size);
      attempted = from + chunk.length;
      let putsHold = Number.POSITIVE_INFINITY;
      for (const p of chunk) if (p.kind === 'put' && p.holdAfter < putsHold) putsHold = p.holdAfter;
      const commitOffset = bound.forChunk(from + chunk.length, putsHold, this.committed);
      for (const p of chunk) this.writing.add(p.kf);
      let result: WriteBatchResult | undefined;
      const t0 = performance.now();
      try {
        result = await this.o.persistence.write({
          writes: chunk.map((p) => this.toWrite(p)),
          commitOffset,
        });
      } catch (err) {
        t.error = err;
        if (err instanceof SnapshotWriteFencedError) t.fenced = true;
      }
      for (const p of chunk) this.writing.delete(p.kf);
      // Counted per chunk (a metric update costs more than the rest of a key's bookkeeping, and a
      // chunk may carry tens of thousands of outputs).
      let applied = 0;
      let notApplied = 0;
      let failed = 0;
      let landedOutputs: Map<string, number> | undefined;
      for (let i = 0; i < chunk.length; i++) {
        const p = chunk[i]!;
        const status = result?.statuses[i];
        if (status === 'applied') {
          t.written++;
          if (p.kind !== 'put') t.deletes++;
          if (p.outputs) {
            this.heldOutputs -= p.outputs.length;
            landedOutputs ??= new Map();
            for (const out of p.outputs) {
              // Emitted records by topic, dead letters by reason (`\u0000` cannot start a topic name).
              const label = out.kind === 'emitted' ? out.topic : `\u0000${String(out.headers?.['kafka-flow-dead-letter-reason'] ?? 'unknown')}`;
              landedOutputs.set(label, (landedOutputs.get(label) ?? 0) + 1);
            }
          }
          applied++;
          if (this.landed(p, now, capturedNext)) t.evicted++;
        } else {
          t.failed++;
          if (status === 'not-applied') notApplied++;
          else failed++;
          if (status === 'not-applied') t.conflicts.push(p.kf.key);
          this.notLanded(p);
        }
        bound.stillHolds(this.keys.get(p.kf.key) === p.kf ? p.kf.holding : undefined);
      }
      if (landedOutputs) {
        for (const [label, n] of landedOutputs) {
          if (label.startsWith('\u0000')) {
            t.deadLetters += n;
            this.m.deadLetters(label.slice(1)).inc(n);
          } else {
            t.outputs += n;
            this.m.outputs(label).inc(n);
          }
        }
      }
      if (applied > 0) this.m.persistedKeys('applied').inc(applied);
      if (notApplied > 0) {
        this.m.persistedKeys('not_applied').inc(notApplied);
        this.refused(t, chunk, result!.statuses);
      }
      if (failed > 0) this.m.persistedKeys('failed').inc(failed);
      if (result?.commitError !== undefined) {
        this.m.commits('failed').inc();
        if (result.commitError instanceof SnapshotWriteFencedError) {
          t.fenced = true;
          t.error = result.commitError;
        } else {
          t.commitError = result.commitError;
          if (strict) break;
        }
      }
      if (result?.committed && commitOffset !== undefined) {
        this.committed = Math.max(this.committed, commitOffset);
        t.committedNow = this.committed;
        this.m.commits('ok').inc();
        this.m.commitDuration.observe((performance.now() - t0) / 1000);
      }
      if (t.fenced || (strict && t.failed > 0)) break;
    }
    // Writes never attempted (the loop stopped early) go back to their keys untouched.
    for (let i = attempted; i < planned.length; i++) this.notLanded(planned[i]!);
    return t;
  }

  /**
   * Writes refused (`not-applied`: the store holds another owner's newer state of these keys, e.g.
   * Cassandra's LWT fence) mean the partition is no longer ours: a fence, whatever the persist and
   * ignorePersistErrors — it stops here, and what its keys hold goes with it. Their outputs were
   * produced before the refused writes (non-transactional backends produce outputs first); kept
   * pending, every later flush of this owner would produce them again. The next owner replays the
   * records from the committed offset and produces them again, once.
   */
  private refused(t: PersistTally, chunk: readonly Planned<S, V>[], statuses: readonly string[]): void {
    t.fenced = true;
    t.error = new SnapshotWriteConflictError(this.topic, this.partition, t.conflicts);
    let outputs = 0;
    for (let i = 0; i < chunk.length; i++) if (statuses[i] === 'not-applied') outputs += chunk[i]!.outputs?.length ?? 0;
    if (outputs > 0) {
      this.log.warn(
        { topic: this.topic, partition: this.partition, keys: t.conflicts.length, outputs },
        'writes refused: another owner holds newer state; the partition stops here, and the outputs produced with the refused writes are produced again by the next owner',
      );
    }
  }

  /**
   * The error policy. A fence stops the partition (thrown for a periodic persist, reported for a
   * revoke or shutdown). A failed write or offset commit throws under the strict policy (a
   * periodic persist without ignorePersistErrors) and stops the partition; otherwise it is logged
   * and the keys keep holding their offsets, to be written next time.
   */
  private applyErrorPolicy(t: PersistTally, reason: PersistReason, strict: boolean): PersistResult | undefined {
    if (t.fenced) {
      this.fail(t.error);
      this.m.persists(reason, 'failed').inc();
      if (timed(reason)) throw t.error;
      this.log.warn({ topic: this.topic, partition: this.partition, err: t.error }, 'persist fenced: partition stopped');
      return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
    }
    if (t.failed > 0) {
      const cause = t.error ?? new SnapshotWriteConflictError(this.topic, this.partition, t.conflicts);
      if (strict) {
        this.m.persists(reason, 'failed').inc();
        const typed = t.error === undefined ? cause : new PersistFailedError(this.topic, this.partition, t.failed, cause);
        throw this.fail(typed);
      }
      this.log.warn(
        { topic: this.topic, partition: this.partition, failed: t.failed, err: cause },
        'persist failed; the keys keep holding their offsets and are retried later',
      );
    }
    if (t.commitError !== undefined) {
      if (strict) {
        this.m.persists(reason, 'failed').inc();
        throw this.fail(new OffsetCommitFailedError(this.topic, this.partition, formatOffset(this.committable()), t.commitError));
      }
      this.log.warn({ topic: this.topic, partition: this.partition, err: t.commitError }, 'offset commit failed');
    }
    return undefined;
  }

  /**
   * After the writes: commits the offset every key now allows, when it is past what the chunks
   * committed (e.g. the keys written were not the lowest holds, or nothing needed writing).
   */
  private async commitCommittable(t: PersistTally, reason: PersistReason, strict: boolean): Promise<PersistResult | undefined> {
    const c = this.committable();
    if (c <= this.committed || t.commitError !== undefined) return undefined;
    const t0 = performance.now();
    try {
      const r = await this.o.persistence.write({ writes: [], commitOffset: c });
      if (r.committed) {
        this.committed = c;
        t.committedNow = c;
        this.m.commits('ok').inc();
        this.m.commitDuration.observe((performance.now() - t0) / 1000);
      }
    } catch (err) {
      this.m.commits('failed').inc();
      if (err instanceof SnapshotWriteFencedError) {
        this.fail(err);
        if (timed(reason)) throw err;
        return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
      }
      if (strict) throw this.fail(new OffsetCommitFailedError(this.topic, this.partition, formatOffset(c), err));
      this.log.warn({ topic: this.topic, partition: this.partition, offset: c, err }, 'offset commit failed');
    }
    return undefined;
  }

  /**
   * The keys the fold deleted since their last write. A replay must not start between a key's
   * first unpersisted record (its hold) and its deleting record: so it gets a delete marker —
   * unless every hold that can remain after this persist is above its deleting offset, in which
   * case the committed offset passes the deletion at once and the key is purged directly (or, never
   * stored, simply forgotten). Holds that can remain: other keys' current holds (a write may fail),
   * and the holds of deleted keys that get a marker (their write may fail too). A direct purge needs
   * the purge and the commit to land together (`atomicCommit`, a Kafka transaction): elsewhere the
   * purge could land and the commit fail (or the process die in between), and a replay from the
   * old committed offset would fold the key again from nothing — so there the key gets its marker.
   */
  private planDeletes(deleted: readonly KeyFlow<S, V>[], planned: Planned<S, V>[], othersMin: number, capturedNext: number): void {
    if (deleted.length === 0) return;
    let floor = othersMin;
    for (const p of planned) if (p.oldHold < floor) floor = p.oldHold;
    // A key with dead letters to produce is written (a marker) whatever the offsets say.
    const marked = new Set<KeyFlow<S, V>>();
    for (const kf of deleted) {
      if (!kf.x?.outputs?.length) continue;
      marked.add(kf);
      const hold = kf.holding ?? Number.POSITIVE_INFINITY;
      if (hold < floor) floor = hold;
    }
    for (let grew = true; grew; ) {
      grew = false;
      for (const kf of deleted) {
        if (marked.has(kf) || kf.lastOffset < floor) continue;
        marked.add(kf);
        grew = true;
        const hold = kf.holding ?? Number.POSITIVE_INFINITY;
        if (hold < floor) floor = hold;
      }
    }
    for (const kf of deleted) {
      const hold = kf.holding ?? Number.POSITIVE_INFINITY;
      if (marked.has(kf) || kf.stored) {
        // A direct purge is safe only if it cannot land without the commit that passes the deletion.
        const purge = !marked.has(kf) && this.o.persistence.atomicCommit === true;
        kf.beginWrite();
        planned.push({ kf, oldHold: hold, holdAfter: capturedNext, kind: purge ? 'purge' : 'delete', events: this.takeEvents(kf), outputs: takeOutputs(kf) });
      } else {
        if (kf.events) kf.events = [];
        kf.holding = undefined;
        kf.markClean();
        this.keys.delete(kf.key);
      }
    }
  }

  private toWrite(p: Planned<S, V>) {
    const { kf } = p;
    if (p.kind === 'purge') return { key: kf.key, purge: { offset: kf.lastOffset }, outputs: p.outputs };
    if (p.kind === 'delete') return { key: kf.key, delete: { offset: kf.lastOffset }, events: p.events, addKey: !kf.stored, outputs: p.outputs };
    return {
      key: kf.key,
      snapshot: this.snapshotting ? { state: kf.state as S, offset: kf.lastOffset } : undefined,
      events: p.events,
      addKey: !kf.stored,
      outputs: p.outputs,
    };
  }

  private takeEvents(kf: KeyFlow<S, V>): FlowRecord<V>[] | undefined {
    if (!kf.events || kf.events.length === 0) return undefined;
    const taken = kf.events;
    kf.events = [];
    return taken;
  }

  /** A key's write landed. Returns true if the key was unloaded. */
  private landed(p: Planned<S, V>, now: number, capturedNext: number): boolean {
    const { kf } = p;
    const unchanged = !kf.changedSinceWrite && !kf.busy;
    if (p.kind === 'purge') {
      kf.stored = false;
      this.unloaded.delete(kf.key);
      if (unchanged && kf.state === undefined) {
        kf.holding = undefined;
        this.keys.delete(kf.key);
      }
      // Revived meanwhile: its new state holds from its first record, as any new key's.
      return false;
    }
    if (p.kind === 'delete') {
      // The marker stays in memory too (it skips a replay's older records) until its purge.
      kf.stored = true;
      this.unloaded.delete(kf.key);
      if (!kf.changedSinceWrite) kf.markClean();
      if (unchanged && kf.state === undefined) {
        kf.holding = undefined;
        kf.flushedClock = now - this.epoch;
        return false;
      }
      // Revived by records folded while the delete was in flight: the new state is unpersisted.
      kf.holding = capturedNext;
      return false;
    }
    kf.stored = true;
    if (!kf.changedSinceWrite) kf.markClean();
    kf.due = false;
    this.markPersisted(kf, now, p.holdAfter);
    if (kf.unload && unchanged && !kf.dirty) {
      this.evict(kf);
      return true;
    }
    return false;
  }

  private notLanded(p: Planned<S, V>): void {
    const { kf } = p;
    // The key keeps holding its old offset (frozen, never corrupt); its journal events and dead
    // letters go back in front of any added since, to be written next time.
    if (p.events && kf.events) kf.events = p.events.concat(kf.events);
    if (p.outputs) kf.outputs = kf.outputs ? p.outputs.concat(kf.outputs) : p.outputs;
    kf.due = false;
    kf.unload = false;
    if (kf.timerAt === undefined && Number.isFinite(this.policy.fireEvery)) kf.timerAt = this.clock.now() - this.epoch + this.policy.fireEvery;
    // A delete marker that did not land is written next time (the key keeps holding meanwhile).
    if (kf.state === undefined && !kf.stored && !kf.dirty && !kf.busy) this.keys.delete(kf.key);
  }

  private markPersisted(kf: KeyFlow<S, V>, now: number, capturedNext: number): void {
    kf.holding = capturedNext;
    kf.flushedClock = now - this.epoch;
  }

  private evict(kf: KeyFlow<S, V>): void {
    kf.holding = undefined;
    this.keys.delete(kf.key);
    if (kf.stored) this.unloaded.add(kf.key);
  }

  /** Restores a recovered key; returns a Promise only while a journal's async fold replays. */
  private restore(kf: KeyFlow<S, V>, found: RecoveredKey<S, V>): void | Promise<void> {
    kf.stored = true;
    if (isLazySnapshot(found.snapshot)) {
      // Decoded when the key is first used (see step): recovery reads only its offset.
      kf.restoreLazy(found.snapshot);
    } else if (found.snapshot) {
      kf.state = found.snapshot.state;
      kf.lastOffset = found.snapshot.offset;
    } else if (found.deleted) {
      kf.state = undefined;
      kf.lastOffset = found.deleted.offset;
    } else if (found.events) {
      const replaying = kf.replay(this.o.fold, found.events as FlowRecord<V>[]);
      if (replaying) return replaying.then(() => this.restored(kf));
    }
    this.restored(kf);
  }

  private restored(kf: KeyFlow<S, V>): void {
    // A delete marker (or a journal that ends deleted) holds nothing — unless records for the key
    // are already queued (read back for a batch); records at or below its offset are skipped.
    if (!kf.hasState && !kf.x?.queue?.length) kf.holding = undefined;
    kf.markClean();
  }

  /** Decodes a lazily recovered state; one that cannot be decoded stops the partition. */
  private decodeOrFail(kf: KeyFlow<S, V>): void {
    try {
      kf.decode();
    } catch (err) {
      throw this.fail(err);
    }
  }

  private registerFirstTimer(kf: KeyFlow<S, V>): void {
    kf.timerAt = firstTimerAt(this.policy, kf.touchedClock);
  }

  private ensureHealthy(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Stops the partition: every later call rethrows `err`. */
  private fail(err: unknown): unknown {
    if (this.failure === undefined) {
      this.failure = err;
      this.log.error({ topic: this.topic, partition: this.partition, err }, 'partition stopped');
    }
    return err;
  }
}

/** Persists that run on a timer or trigger of the owner (persistEvery, outputEvery, the idle flush) and fail the partition when strict. */
function timed(reason: PersistReason): boolean {
  return reason === 'periodic' || reason === 'outputs' || reason === 'idle';
}

function takeOutputs<S, V>(kf: KeyFlow<S, V>): OutputRecord[] | undefined {
  const taken = kf.outputs;
  kf.outputs = undefined;
  kf.tidy();
  return taken && taken.length > 0 ? taken : undefined;
}
