import { isLazySnapshot, type PartitionPersistence, type RecoveredKey } from './ports';
import { type PersistenceMode, persistsJournal, persistsSnapshots } from '../core/persistence-types';
import { type Clock, systemClock } from './clock';
import type { Codec } from '../core/codec/codec';
import { DecodeError } from '../core/codec/errors';
import { utf8Text } from '../core/codec/utf8';
import { EmitBuffer, type OutputOptions, TimerSource } from './emit';
import type { DecodeFailurePolicy } from './decode-policy';
import { FoldError, PartitionStateError, TimerError } from './errors';
import { type Fold, isPromise, type OnTimer } from './fold';
import { type KeyTimer, type TimeDomain, type TimerEdit, TTL_TIMER, withoutTimer, withTimer } from './key-timers';
import { TimerQueue } from './timer-queue';
import { StoredTimers } from './stored-timers';
import { KeyFlow } from './key-flow';
import { KeyRuns } from './key-runs';
import { type Logger, silentLogger } from '../core/logger';
import { FlowMetrics, type PartitionMetrics } from './metrics';
import { offsetFromKafka } from './offsets';
import { PartitionKeys } from './partition-keys';
import { cachedPartition, type StateCache } from './state-cache';
import { PartitionPersister } from './partition-persister';
import { PendingOutputs } from './pending-outputs';
import type { PersistReason, PersistResult } from './persist-types';
import { deadLetter, type PoisonPolicy, type PoisonReason } from './poison';
import { outputCount, type PendingOutput } from '../core/emitted-outputs';
import type { FlowRecord, InputMessage, RecordHeaders } from './record';
import { firstTimerAt, onTimer, type TimerPolicy, timerPolicy } from './timers';

export type { PersistReason, PersistResult } from './persist-types';

/** A key's live state as its partition holds it (PartitionFlow.lookup). */
export interface KeyLookup<S> {
  /** In memory, or read back from the store (unloaded from memory). */
  readonly from: 'memory' | 'store';
  /** Undefined: deleted (by the record at `offset`). */
  readonly state: S | undefined;
  /** The offset of the last record folded into the key (or of the snapshot it was recovered from). */
  readonly offset: number;
  /** The store holds this state (false: folded since the key's last write landed, or a transient flow). */
  readonly persisted: boolean;
}

export interface PartitionFlowOptions<S, V> {
  /** The flow's name (metrics and logs). */
  readonly flow: string;
  readonly topic: string;
  readonly partition: number;
  /** The committed offset when the partition was assigned (the next offset to consume), as kafkajs reads it: converted once, here. */
  readonly assignedAt: string;
  readonly fold: Fold<S, V>;
  readonly codec: Codec<V>;
  readonly persistence: PartitionPersistence<S, V>;
  readonly mode: PersistenceMode;
  readonly timers?: TimerPolicy;
  /** Fires a key's timers (ctx.timers); without it a timer that comes due is dropped. */
  readonly onTimer?: OnTimer<S>;
  /** A key expires (is deleted) this long after its last record: by the owner's clock, or by record timestamps. */
  readonly stateTtl?: { readonly ms: number; readonly time: TimeDomain };
  /** Event time: the partition's watermark is its highest record timestamp so far minus this (ms). Default 0. */
  readonly allowedLateness?: number;
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
  /**
   * The worker's bounded state cache, when the backend reads keys from its store on demand
   * (`persistence.has`): this partition reports its live keys to it and unloads its share of the
   * excess. Ignored by a backend that does not.
   */
  readonly stateCache?: StateCache;
}

const NO_HEADERS: RecordHeaders = Object.freeze({});

/** Fires of timers set by fires in one pass before the rest waits for the next record or tick (a timer re-set for now each time would spin). */
const MAX_REFIRES = 10_000;

/**
 * One input partition: routes each batch's records to their keys, folds them, and persists keys
 * and commits the offset when asked. Pure with respect to I/O: it reads and writes only through
 * the PartitionPersistence it was given.
 *
 * Call `recover()` once (unless the flow is transient), then `handleBatch` per batch (awaiting it
 * if it returns a Promise), `triggerTimers` every so often (a second, say) and `persist` when the
 * owner's persist cadence calls for it (every persistEvery, idle, outputs) or on revoke/shutdown.
 *
 * Records are folded as they are routed, in offset order: a synchronous fold never queues. A key
 * whose fold returns a Promise (or that must first be read back from the store) becomes busy: its
 * later records wait in its queue and fold in order once it is done, while other keys go on.
 * `asyncConcurrency` decides how batches and busy keys interleave (see PartitionFlowOptions).
 *
 * Its parts: the keys in memory (PartitionKeys, partition-keys.ts), shared with the persists; the
 * busy keys' runs (KeyRuns, key-runs.ts); the outputs not landed yet (PendingOutputs,
 * pending-outputs.ts); and the persist pipeline (PartitionPersister, partition-persister.ts, over
 * persist-plan.ts and persist-writes.ts), which owns the committed offset. This class keeps the
 * fold itself — routing a batch's records to their keys and folding them — recovery, the key
 * timers and what the runtime asks of a partition.
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
  /** Keys keep their clocks relative to this (small integers, not boxed doubles). */
  private readonly epoch: number;

  /** The live keys: of the PartitionKeys shared with the persists, held directly (the fold's hot path). */
  private readonly keys: Map<string, KeyFlow<S, V>>;
  /** Keys unloaded from memory with state in the store: read again when a record comes for them. */
  private readonly unloaded: Set<string>;
  /** Keys with a write in flight: if they finish meanwhile, their stored state must still be deleted. */
  private readonly writing: Set<KeyFlow<S, V>>;
  /** The keys as the persists share them (unloading for the state cache goes through it). */
  private readonly partitionKeys: PartitionKeys<S, V>;
  /** The backend reads any key on demand: whether its store has state for a key not in memory. */
  private readonly storeHas: ((key: string) => boolean) | undefined;
  /** The store's synchronous read of a key out of memory (PartitionPersistence.readNow), when it has one. */
  private readonly readNow: ((key: string) => RecoveredKey<S, V> | undefined) | undefined;
  /** The state cache and this partition's name in it (set when the backend reads keys on demand). */
  private readonly cache: { readonly of: StateCache; readonly id: string } | undefined;
  /** Nothing was left to unload for the cache: not tried again until a persist makes keys clean. */
  private cacheStarved = false;
  /** The partition clock of the last unload: keys touched since get a second chance. */
  private lastUnload = 0;
  /** Outputs emitted (or dead-lettered) and not landed yet, and when they are due. */
  private readonly outputs: PendingOutputs;
  /** The persist pipeline; owns the committed offset. */
  private readonly persister: PartitionPersister<S, V>;

  private nextOffset: number;
  private recovered = false;
  private persistChain: Promise<unknown> = Promise.resolve();
  private failure: unknown;

  /** The fold context of synchronous folds (a key whose fold goes async takes it over). */
  private ctx: EmitBuffer;
  /** The partition clock of the batch being routed. */
  private rel = 0;
  /** Counted as records are folded; added to the metrics once per batch or async run. */
  private applied = 0;
  private skipped = 0;
  /** The batch returned a Promise that has not settled yet. */
  private batchPending = false;
  /** Busy keys (async folds, read-backs), the records queued behind them, asyncConcurrency's slots. */
  private readonly runs: KeyRuns<S, V>;
  /** The keys' pending timers by clock (with onTimer or stateTtl), earliest first. */
  private readonly due: Record<TimeDomain, TimerQueue> = { processing: new TimerQueue(), event: new TimerQueue() };
  /** Key timers are in use (onTimer or stateTtl): the partition tracks them and its watermark. */
  private readonly timed: boolean;
  /** Keys out of memory whose timers the store finds (a bounded state cache with key timers): read back when due. */
  private readonly storedTimers: StoredTimers<S, V> | undefined;
  /** The timer queues' size after they were last rid of the entries of keys that left memory. */
  private queuesTidied = 0;
  /** Event time: the highest record timestamp folded here so far, minus allowedLateness. */
  private watermark = Number.NEGATIVE_INFINITY;
  /** Fires and expiries counted while firing; added to the metrics once per firing. */
  private fired = 0;
  private expired = 0;

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
    this.nextOffset = offsetFromKafka(options.assignedAt);
    const has = options.persistence.has;
    this.storeHas = has === undefined ? undefined : (key) => has.call(options.persistence, key);
    const readNow = options.persistence.readNow;
    // Not with journals: a journal's replay may await an async fold.
    this.readNow = has === undefined || readNow === undefined || persistsJournal(options.mode) ? undefined : (key) => readNow.call(options.persistence, key);
    this.cache = this.storeHas && options.stateCache ? { of: options.stateCache, id: cachedPartition(options.topic, options.partition) } : undefined;
    const keys = new PartitionKeys<S, V>(this.epoch, this.storeHas !== undefined);
    this.partitionKeys = keys;
    this.keys = keys.live;
    this.unloaded = keys.unloaded;
    this.writing = keys.writing;
    this.outputs = new PendingOutputs(this.clock, options.outputEvery ?? 1000, options.maxPendingOutputs);
    this.persister = new PartitionPersister<S, V>({
      topic: options.topic,
      partition: options.partition,
      persistence: options.persistence,
      mode: options.mode,
      snapshotting: persistsSnapshots(options.mode),
      policy: this.policy,
      clock: this.clock,
      log: this.log,
      metrics: this.m,
      keys,
      outputs: this.outputs,
      committed: this.nextOffset,
      position: () => this.nextOffset,
      fail: (err) => this.fail(err),
    });
    this.runs = new KeyRuns<S, V>({
      asyncConcurrency: options.asyncConcurrency,
      outputs: options.outputs,
      failed: () => this.failure !== undefined,
      fail: (err) => this.fail(err),
      tick: () => {
        this.rel = this.clock.now() - this.epoch;
      },
      step: (kf, record, offset, message, decodeError, ctx) => this.step(kf, record, offset, message, decodeError, ctx),
      apply: (kf, next, emitted, timers, record, offset) => this.apply(kf, next, emitted, timers, record, offset),
      poisoned: (kf, record, offset, message, reason, error) => this.poisoned(kf, record, offset, message, reason, error),
      countFolded: () => this.countFolded(),
      forgetIfNothing: (kf) => this.forgetIfNothing(kf),
      fireQueued: (kf, fire) => this.fireQueued(kf, fire),
      afterRun: (kf) => {
        if (kf.timers !== undefined && this.timed) this.fireKeyDue(kf, this.watermark);
      },
      beforeQueued: (kf, q) => {
        if (q.watermark !== undefined && kf.timers !== undefined) this.fireKeyDue(kf, q.watermark);
      },
      read: (key) => options.persistence.read(key),
      restore: (kf, found) => this.restore(kf, found),
      unloaded: this.unloaded,
    });
    this.ctx = new EmitBuffer(options.outputs);
    this.timed = options.onTimer !== undefined || options.stateTtl !== undefined;
    const readDue = options.persistence.readDue;
    this.storedTimers = this.timed && this.storeHas && readDue ? new StoredTimers<S, V>((...a) => readDue.call(options.persistence, ...a), (key) => this.keys.has(key)) : undefined;
    keys.timersInStore = this.storedTimers !== undefined;
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
      const kf = new KeyFlow<S, V>(found.key, created, this.persister.committed, this.journaling);
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
    const fromBytes = codec.decodeFrom !== undefined;
    const policy = o.onDecodeFailure ?? 'fail';
    this.rel = this.clock.now() - this.epoch;
    this.runs.beginBatch();
    let keyless = 0;
    let lastOffset = -1;
    // Records below the position were routed already: handed again when the consumer was seeked
    // back while a batch folded on (an in-place recovery seeks to the position of that moment).
    // Skipped here, not by their keys: a key deleted and forgotten since (its marker purged) would
    // be created afresh from its older records.
    const position = this.nextOffset;

    try {
      for (let i = 0; i < messages.length; i++) {
        const m = messages[i]!;
        // Our fetch decoder's records say where their key and value are in the response: read
        // from there, without a Buffer view each (the same text, the same value or error), and
        // give their offset as a number.
        const src = m.bytes;
        const offset = src === undefined ? offsetFromKafka(m.offset) : m.offsetNumber!;
        lastOffset = offset;
        if (offset < position) {
          this.skipped++;
          continue;
        }
        let key: string;
        if (src === undefined) {
          const rawKey = m.key;
          if (rawKey === null || rawKey === undefined) {
            keyless++;
            continue;
          }
          key = typeof rawKey === 'string' ? rawKey : rawKey.toString('utf8');
        } else {
          const keyEnd = m.keyEnd!;
          if (keyEnd < 0) {
            keyless++;
            continue;
          }
          key = utf8Text(src, m.keyStart!, keyEnd);
        }
        let value: V;
        if (src === undefined ? m.value === null || m.value === undefined : m.valueEnd! < 0) {
          value = null as V;
        } else {
          try {
            value = src !== undefined && fromBytes ? codec.decodeFrom!(src, m.valueStart!, m.valueEnd!) : codec.decode(m.value!);
          } catch (cause) {
            const error = new DecodeError({ topic, partition, key, offset: m.offset }, cause);
            this.m.decodeFailures(policy).inc();
            if (policy === 'fail') throw this.fail(error);
            if (policy === 'dead-letter') {
              // In its key's turn (records before it fold first), with the key's next write.
              const record: FlowRecord<V> = { topic, partition, offset: m.offset, key, value: null as V, timestamp: m.timestamp, headers: m.headers ?? NO_HEADERS };
              if (this.timed) this.advanceWatermark(record.timestamp);
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
        if (this.timed) this.advanceWatermark(record.timestamp);
        this.route(this.keyFor(key, offset), record, offset, m, undefined);
      }
    } catch (err) {
      throw this.fail(err);
    }

    // Routed is handled, as far as offsets go: a busy key holds the offset of its first waiting record.
    if (lastOffset + 1 > this.nextOffset) this.nextOffset = lastOffset + 1;
    if (keyless > 0) this.m.keylessDropped.inc(keyless);
    this.countFolded();
    if (this.cache) this.trimCache();

    const wait = this.runs.endBatch();
    if (wait) return this.awaitBatch(wait);
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
      if (this.readNow) {
        // The store answers at once: the key's records fold now (a snapshot restores synchronously).
        const found = this.readNow(key);
        if (found) {
          this.restore(kf, found);
          // Its event timers due by now fire before the record, as for a key read back (KeyRuns' beforeQueued).
          if (this.timed && kf.timers !== undefined) this.fireKeyDue(kf, this.watermark);
        }
      } else if (this.inStore(key)) {
        this.runs.readBack(kf);
      }
    }
    // A key that held nothing (a delete marker waiting for its purge) holds from its next record.
    if (kf.holding === undefined) kf.holding = offset;
    return kf;
  }

  /** Folds the record now, or queues it behind the key's async fold (or read-back), or behind the busy keys of a full partition. */
  private route(kf: KeyFlow<S, V>, record: FlowRecord<V>, offset: number, message: InputMessage, decodeError: unknown): void {
    const queue = kf.x?.queue;
    if (queue !== undefined) {
      queue.push(this.timed ? { record, offset, message, decodeError, watermark: this.watermark } : { record, offset, message, decodeError });
      this.runs.queued++;
      return;
    }
    const limit = this.o.asyncConcurrency;
    if (limit !== undefined && this.runs.inFlight >= limit) {
      this.runs.wait(kf, this.timed ? { record, offset, message, decodeError, watermark: this.watermark } : { record, offset, message, decodeError });
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
    this.runs.fold(kf, { record, offset, message }, pending);
  }

  /**
   * One record into its key: skipped if at or below the key's last offset, to the poison handler if
   * undecodable or the fold throws, else folded. Returns the fold's Promise when it went async
   * (the key's run settles it, KeyRuns).
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
    ctx.begin(record, kf.timers);
    try {
      next = this.o.fold(kf.state, record, ctx);
    } catch (err) {
      ctx.discard(); // a failed record's emits go with it
      this.poisoned(kf, record, offset, message, 'fold', err);
      return undefined;
    }
    if (isPromise(next)) return next;
    this.apply(kf, next, ctx.take(), ctx.takeTimers(), record, offset);
    return undefined;
  }

  private apply(
    kf: KeyFlow<S, V>,
    next: S | undefined,
    emitted: PendingOutput[] | undefined,
    timers: TimerEdit | undefined,
    record: FlowRecord<V>,
    offset: number,
  ): void {
    if (this.timed) this.applyTimers(kf, next, timers, record);
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

  private addOutputs(kf: KeyFlow<S, V>, outputs: readonly PendingOutput[]): void {
    kf.addOutputs(outputs);
    this.outputs.added(outputCount(outputs));
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
   * Resolves once no key is busy (every record handed over is folded, or the partition failed):
   * with asyncConcurrency set, batches return before their async folds end.
   */
  drained(): Promise<void> {
    return this.runs.drained();
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
      // A key with timers pending stays in memory (its timers are the partition's to fire).
      if (decision.unload && kf.timers === undefined) kf.unload = true;
      if (decision.registerAt !== undefined) kf.timerAt = decision.registerAt;
    }
    if (this.timed) this.fireTimers(now);
  }

  /** Fires the key timers due at `now` (processing time) and at the watermark (event time). */
  private fireTimers(now: number): void {
    if (this.storedTimers) {
      this.rel = now - this.epoch;
      this.storedTimers.forget();
      try {
        this.loadDue('processing', now);
        this.loadDue('event', this.watermark);
      } catch (err) {
        throw this.fail(err); // the store could not be read: the partition stops, as for a record's read
      }
    }
    this.fireDue('processing', now);
    this.fireDue('event', this.watermark);
  }

  /**
   * Event time: a record's timestamp moves the watermark, and the event timers at or before it —
   * those it passes, and those set at or before it by the records before — fire before the record
   * folds (a busy key's in its turn).
   */
  private advanceWatermark(timestamp: string): void {
    const mark = Number(timestamp) - (this.o.allowedLateness ?? 0);
    if (mark > this.watermark) {
      this.watermark = mark;
      if (this.storedTimers) this.loadDue('event', mark);
    }
    const next = this.due.event.peek();
    if (next !== undefined && next.at <= this.watermark) this.fireDue('event', this.watermark);
  }

  /**
   * Takes into memory the keys out of memory with a timer of `time` due at `until` (read from the
   * store now, as a record for them would read them back): their timers join the queues, and fire
   * as an in-memory key's do. Such a key holds the next offset, as one read back for a record
   * holds that record's: everything before it is in the store.
   */
  private loadDue(time: TimeDomain, until: number): void {
    for (const found of this.storedTimers!.due(time, until)) {
      if (this.keys.has(found.key)) continue;
      const kf = new KeyFlow<S, V>(found.key, this.rel, this.nextOffset, this.journaling);
      this.restore(kf, found);
      this.registerFirstTimer(kf);
      this.keys.set(found.key, kf);
      this.m.keysReadForTimers.inc();
    }
  }

  /**
   * Fires each timer of `time` due at `until`, earliest first (then by key and name). An entry is
   * checked against its key's timers: gone (cancelled, fired, the key deleted) it is dropped, moved
   * later it is queued again at its new time; a key busy folding asynchronously gets the fire in
   * its queue, after the records before it (fireQueued).
   */
  private fireDue(time: TimeDomain, until: number): void {
    const queue = this.due[time];
    let top = queue.peek();
    if (top === undefined || top.at > until) return;
    // Timers set by the fires join the queue at once (due ones fire in this pass, in order), but a
    // flow whose onTimer keeps setting a timer for now must not spin here: past this many entries,
    // the rest waits for the next record or tick.
    let budget = queue.size + MAX_REFIRES;
    try {
      for (; top !== undefined && top.at <= until && budget-- > 0; top = queue.peek()) {
        queue.pop();
        const name = top.name;
        const kf = this.keys.get(top.key);
        const timer = kf === undefined ? undefined : timerNamed(kf.timers, name);
        if (kf === undefined || timer === undefined || timer.time !== time || timer.at < top.at) continue;
        if (timer.at > top.at) {
          queue.push({ at: timer.at, key: top.key, name });
          continue;
        }
        if (kf.busy) {
          // Its turn comes after the records queued before: the fire waits with them.
          kf.x!.queue!.push({ fire: { name, time, until } });
          this.runs.queued++;
          continue;
        }
        this.fire(kf, timer);
      }
    } finally {
      this.countFires();
    }
  }

  /**
   * A timer queued behind its busy key's records, in its turn: the key's timers of that clock due at
   * `until` fire, earliest first (the records before may have set earlier ones, or moved this one).
   */
  private fireQueued(kf: KeyFlow<S, V>, fire: { readonly name: string; readonly time: TimeDomain; readonly until: number }): void {
    this.fireKeyDue(kf, fire.until, fire.time);
    // The queue entry that brought this fire is gone: a timer the records before it moved past
    // `until` needs an entry again (an extra one is dropped when it comes up).
    for (const t of kf.timers ?? []) if (t.time === fire.time) this.due[t.time].push({ at: t.at, key: kf.key, name: t.name });
  }

  /**
   * A key's timers of `time` at or before `until`, earliest first (then by name) — those its
   * earlier records or fires set while the clock had already passed them included: what a key
   * folding synchronously would have fired by then. A timer moved past `until` is left to the
   * partition's queue (its entry comes up again).
   */
  private fireKeyDue(kf: KeyFlow<S, V>, until: number, time: TimeDomain = 'event'): void {
    try {
      for (let budget = MAX_REFIRES; budget > 0; budget--) {
        let next: KeyTimer | undefined;
        for (const t of kf.timers ?? []) {
          if (t.time === time && t.at <= until && (next === undefined || t.at < next.at || (t.at === next.at && t.name < next.name))) next = t;
        }
        if (next === undefined) return;
        this.fire(kf, next);
      }
    } finally {
      this.countFires();
    }
  }

  private countFires(): void {
    if (this.fired > 0) this.m.timersFired('timer').inc(this.fired);
    if (this.expired > 0) this.m.timersFired('ttl').inc(this.expired);
    this.fired = this.expired = 0;
  }

  /** One key timer fires: stateTtl deletes the key; any other runs onTimer, whose state, emits and timer edits the key takes. */
  private fire(kf: KeyFlow<S, V>, timer: KeyTimer): void {
    if (kf.lazy) this.decodeOrFail(kf);
    const rest = withoutTimer(kf.timers, timer.name);
    if (!kf.hasState) {
      this.setTimers(kf, undefined); // a deleted key keeps no timers
      return;
    }
    const onTimer = this.o.onTimer;
    if (timer.name === TTL_TIMER || onTimer === undefined) {
      const expires = timer.name === TTL_TIMER;
      this.setTimers(kf, expires ? undefined : rest);
      kf.markChanged();
      kf.due = true;
      if (expires) {
        // Expired: deleted as a fold returning no state deletes it (a marker, then a purge).
        kf.state = undefined;
        this.expired++;
        this.forgetIfNothing(kf);
      }
      return;
    }
    const ctx = this.ctx;
    ctx.begin(new TimerSource(this.topic, this.partition, kf.key, timer.name, timer.at), rest);
    let next: S | undefined;
    try {
      next = onTimer(kf.state as S, { key: kf.key, name: timer.name, at: timer.at, time: timer.time }, ctx);
      if (isPromise(next)) {
        (next as Promise<unknown>).catch(() => undefined);
        throw new TypeError('onTimer returned a Promise: it must return the new state synchronously');
      }
    } catch (err) {
      ctx.discard();
      throw this.fail(new TimerError(this.topic, this.partition, kf.key, timer, err));
    }
    const emitted = ctx.take();
    const edited = ctx.takeTimers();
    if (emitted) this.addOutputs(kf, emitted);
    kf.markChanged();
    kf.due = true;
    kf.state = next;
    this.setTimers(kf, next === undefined ? undefined : edited ? edited.timers : rest);
    this.fired++;
    if (next === undefined) this.forgetIfNothing(kf);
  }

  /** A record folded: the fold's timer edits, the stateTtl timer moved past the record, none left on a deleted key. */
  private applyTimers(kf: KeyFlow<S, V>, next: S | undefined, edited: TimerEdit | undefined, record: FlowRecord<V>): void {
    let timers = edited ? edited.timers : kf.timers;
    const ttl = this.o.stateTtl;
    if (next === undefined) timers = undefined;
    else if (ttl) {
      const from = ttl.time === 'event' ? Number(record.timestamp) : this.epoch + this.rel;
      timers = withTimer(timers, { name: TTL_TIMER, at: from + ttl.ms, time: ttl.time });
    }
    if (timers === kf.timers) return;
    this.setTimers(kf, timers);
    kf.markChanged();
  }

  /**
   * The key's timers become `after`: a timer new, moved earlier or to the other clock is queued; one
   * moved later keeps its entry, which queues it again when it comes up (fireDue).
   */
  private setTimers(kf: KeyFlow<S, V>, after: readonly KeyTimer[] | undefined): void {
    const before = kf.timers;
    kf.timers = after !== undefined && after.length > 0 ? after : undefined;
    if (after === undefined) return;
    for (const t of after) {
      const old = timerNamed(before, t.name);
      if (old !== undefined && old.time === t.time && old.at <= t.at) continue;
      this.due[t.time].push({ at: t.at, key: kf.key, name: t.name });
    }
  }

  /**
   * Persists keys (see PersistReason) in batches of the backend's maxWritesPerBatch, each carrying
   * the highest offset it is safe to commit once it lands, then commits what is left to commit.
   * Persists run one at a time, in call order.
   */
  persist(now: number = this.clock.now(), reason: PersistReason = 'periodic'): Promise<PersistResult> {
    const run = this.persistChain.then(async () => {
      this.ensureHealthy();
      const result = await this.persister.run(now, reason);
      if (this.cache) {
        // Written keys are clean now: they can leave the cache.
        this.cacheStarved = false;
        this.trimCache();
      }
      return result;
    });
    this.persistChain = run.catch(() => undefined);
    return run;
  }

  /** Settles once the persists started so far have landed or failed (never rejects). */
  persistsSettled(): Promise<void> {
    return this.persistChain.then(() => undefined);
  }

  /**
   * Some key has had outputs pending for `outputEvery` or longer: the owner should run an
   * `outputs` persist now (so outputs land within outputEvery of their record, whatever persistEvery).
   */
  outputsDue(now: number = this.clock.now()): boolean {
    return this.failure === undefined && this.outputs.due(now);
  }

  /**
   * The partition holds `maxPendingOutputs` outputs or more (emitted records and dead letters not
   * landed yet): the owner should run an `outputs` persist at once and fold nothing more until
   * it has made room (workers/runtime/flow-runtime.ts). Never true for a stopped partition.
   */
  outputsFull(): boolean {
    return this.outputs.full() && this.failure === undefined;
  }

  /** Outputs emitted (or dead-lettered) and not landed yet: held on their keys, or in a write in flight. */
  get pendingOutputs(): number {
    return this.outputs.held;
  }

  /** The offset it is safe to commit if it moved past the last commit, else undefined. */
  offsetToCommit(): number | undefined {
    const c = this.persister.committable();
    return c > this.persister.committed ? c : undefined;
  }

  /** The last committed offset (the assigned offset until this flow commits). */
  get committedOffset(): number {
    return this.persister.committed;
  }

  /** One past the last offset handled. */
  get position(): number {
    return this.nextOffset;
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
  holdingOf(key: string): number | undefined {
    return this.keys.get(key)?.holding;
  }

  /**
   * A key as this partition holds it now, for a live state query: from memory — its state, the
   * offset of the last record folded into it, whether the store holds that state — or, for a key
   * unloaded from memory, read from the store (`persistence.read`: the owner's snapshot cache or
   * local store); undefined when the partition has nothing for it. Changes nothing: a state that
   * cannot be decoded throws here and stays undecoded (the key's next record stops the partition).
   */
  async lookup(key: string): Promise<KeyLookup<S> | undefined> {
    const live = this.keys.get(key);
    if (live !== undefined) return this.lookedUp(live, 'memory', this.o.mode !== 'none' && !live.dirty);
    if (!this.inStore(key)) return undefined;
    const found = await this.o.persistence.read(key);
    if (found === undefined) return undefined;
    const kf = new KeyFlow<S, V>(key, this.rel, this.nextOffset, false);
    await this.restore(kf, found);
    return this.lookedUp(kf, 'store', true);
  }

  private lookedUp(kf: KeyFlow<S, V>, from: KeyLookup<S>['from'], persisted: boolean): KeyLookup<S> | undefined {
    if (kf.lastOffset < 0) return undefined; // created for a record not folded yet
    return { from, state: kf.state, offset: kf.lastOffset, persisted };
  }

  /** Live keys and their states. */
  *states(): IterableIterator<[string, S]> {
    for (const [key, kf] of this.keys) {
      if (!kf.hasState) continue;
      if (kf.lazy) this.decodeOrFail(kf);
      yield [key, kf.state as S];
    }
  }

  /** Unloaded with state in the store: a record for it reads it back first. */
  private inStore(key: string): boolean {
    return this.unloaded.has(key) || this.storeHas?.(key) === true;
  }

  /** Reports the live keys to the worker's state cache and, over a bound, unloads this partition's share of keys the store holds. */
  private trimCache(): void {
    const { of, id } = this.cache!;
    const unloaded = of.report(id, { keys: this.keys.size, bytes: this.partitionKeys.live.bytes }, (want) => {
      if (this.cacheStarved) return { keys: 0, bytes: 0 };
      const done = this.partitionKeys.unloadClean(want, this.lastUnload);
      // Every other key is changed, busy or waiting for a write: none until a persist.
      if (done.keys < want.keys || done.bytes < want.bytes) this.cacheStarved = true;
      return done;
    });
    if (unloaded.keys > 0) {
      this.lastUnload = this.rel;
      this.m.keysEvicted.inc(unloaded.keys);
      this.m.keysLive.set(this.keys.size);
      if (this.storedTimers) {
        // Their timers are the store's to find now: the next look asks it whatever it said before.
        this.storedTimers.forget();
        this.tidyQueues();
      }
    }
    this.m.keysLiveBytes.set(this.partitionKeys.live.bytes);
  }

  /**
   * Keys that left memory leave their entries in the timer queues (dropped when they come up); once
   * the queues have doubled since they were last tidied, the entries of keys not in memory go (the
   * store's index has their timers), so the queues stay about the size of the keys in memory.
   */
  private tidyQueues(): void {
    const size = this.due.processing.size + this.due.event.size;
    if (size <= 2 * this.queuesTidied + 1024) return;
    const live = (e: { readonly key: string }): boolean => this.keys.has(e.key);
    this.due.processing.retain(live);
    this.due.event.retain(live);
    this.queuesTidied = this.due.processing.size + this.due.event.size;
  }

  /** Restores a recovered key; returns a Promise only while a journal's async fold replays. */
  private restore(kf: KeyFlow<S, V>, found: RecoveredKey<S, V>): void | Promise<void> {
    kf.stored = true;
    if (found.size !== undefined) this.partitionKeys.resize(kf, found.size);
    if (isLazySnapshot(found.snapshot)) {
      // Decoded when the key is first used (see step): recovery reads only its offset.
      kf.restoreLazy(found.snapshot);
    } else if (found.snapshot) {
      kf.state = found.snapshot.state;
      kf.lastOffset = found.snapshot.offset;
    }
    const timers = found.snapshot?.timers;
    if (timers !== undefined && timers.length > 0) {
      if (this.timed) this.setTimers(kf, timers);
      else kf.timers = timers; // kept (and written back) though this flow has no onTimer: a flow redeployed with one fires them
    } else if (found.deleted) {
      kf.state = undefined;
      kf.lastOffset = found.deleted.offset;
      kf.storedMarker = true;
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

/** The timer of this name among a key's timers (a loop: called per fire and per edit). */
function timerNamed(timers: readonly KeyTimer[] | undefined, name: string): KeyTimer | undefined {
  if (timers === undefined) return undefined;
  for (let i = 0; i < timers.length; i++) if (timers[i]!.name === name) return timers[i];
  return undefined;
}
