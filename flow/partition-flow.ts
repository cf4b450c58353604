import type { PartitionPersistence, RecoveredKey, WriteBatchResult } from './ports';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import { type PersistenceMode, persistsJournal, persistsSnapshots } from '../core/persistence-types';
import { type Clock, systemClock } from './clock';
import { CommitBound } from './commit-bound';
import type { Codec } from '../core/codec/codec';
import { DecodeError } from '../core/codec/errors';
import type { OutputOptions } from './emit';
import type { DecodeFailurePolicy } from './decode-policy';
import { FoldError, OffsetCommitFailedError, PartitionStateError, PersistFailedError } from './errors';
import type { Fold } from './fold';
import { KeyFlow, type PoisonHandler } from './key-flow';
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
 * `revoke`: every dirty key if a timer asked for flushOnRevoke, otherwise only pending deletes.
 * `shutdown`: every dirty key ("persist now"). Revoke and shutdown never throw for a failed write:
 * the failure is counted and the keys concerned keep holding their offsets.
 */
export type PersistReason = 'periodic' | 'outputs' | 'revoke' | 'shutdown';

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
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly metrics?: FlowMetrics;
}

const NO_HEADERS: RecordHeaders = Object.freeze({});

/**
 * One key write in flight, and what to do with the key when it lands. `put`: its state;
 * `delete`: its delete marker (the fold returned no state); `purge`: the marker goes, the
 * committed offset having passed it.
 */
interface Planned<S, V> {
  readonly kf: KeyFlow<S, V>;
  readonly version: number;
  readonly oldHold: number;
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

  private readonly keys = new Map<string, KeyFlow<S, V>>();
  /** Keys unloaded from memory with state in the store: read again when a record comes for them. */
  private readonly unloaded = new Set<string>();
  /** Keys with a write in flight: if they finish meanwhile, their stored state must still be deleted. */
  private readonly writing = new Set<KeyFlow<S, V>>();
  private readonly touched: KeyFlow<S, V>[] = [];

  private nextOffset: number;
  private committed: number;
  private recovered = false;
  private folding = false;
  private persistChain: Promise<unknown> = Promise.resolve();
  private failure: unknown;
  /** When the oldest pending output (of any key) was folded, if any is pending (clock ms). */
  private outputsPendingSince: number | undefined;

  constructor(options: PartitionFlowOptions<S, V>) {
    this.o = options;
    this.topic = options.topic;
    this.partition = options.partition;
    this.policy = options.timers ?? timerPolicy({ persistPeriodically: {} });
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? silentLogger;
    this.m = (options.metrics ?? FlowMetrics.of()).forPartition(options.flow, options.topic, options.partition);
    this.journaling = persistsJournal(options.mode);
    this.snapshotting = persistsSnapshots(options.mode);
    this.nextOffset = parseOffset(options.assignedAt);
    this.committed = this.nextOffset;
    if (options.mode === 'none') this.recovered = true;
    if ((options.onDecodeFailure === 'dead-letter' || options.onFoldFailure === 'dead-letter') && !options.deadLetterTopic) {
      throw new PartitionStateError('the dead-letter policy needs a deadLetterTopic');
    }
    this.poison = (kf, record, reason, error) => this.onPoison(kf, record, reason, error);
  }

  /** The batch being folded: a dead letter is the record as it came, looked up here by offset. */
  private batch: readonly InputMessage[] = [];
  private readonly poison: PoisonHandler<S, V>;

  private onPoison(kf: KeyFlow<S, V>, record: FlowRecord<V>, reason: PoisonReason, error: unknown): 'skipped' | 'dead-lettered' {
    const policy = (reason === 'decode' ? this.o.onDecodeFailure : this.o.onFoldFailure) ?? 'fail';
    const typed = reason === 'fold' ? new FoldError(this.topic, this.partition, record.key, record.offset, error) : error;
    if (reason === 'fold') this.m.foldFailures(policy).inc();
    if (policy === 'fail') throw this.fail(typed);
    if (policy === 'skip') {
      this.log.warn({ topic: this.topic, partition: this.partition, offset: record.offset, reason, err: typed }, 'skipped a poison record');
      return 'skipped';
    }
    const message = findMessage(this.batch, record.offset);
    if (!message) throw this.fail(new PartitionStateError(`dead letter: offset ${record.offset} is not in the batch being folded`));
    // Persisted (past the record) with its dead letter at the next persist.
    kf.addOutputs([deadLetter(message, { flow: this.o.flow, topic: this.topic, partition: this.partition, deadLetterTopic: this.o.deadLetterTopic! }, reason, typed)]);
    this.log.warn({ topic: this.topic, partition: this.partition, offset: record.offset, reason, deadLetterTopic: this.o.deadLetterTopic }, 'dead-lettering a poison record');
    return 'dead-lettered';
  }

  /** Reads every persisted key of the partition into memory. Call once, before the first batch. */
  async recover(): Promise<number> {
    this.ensureHealthy();
    if (this.recovered && this.o.mode !== 'none') throw new PartitionStateError('recover() was already called');
    let count = 0;
    const createdAt = { clock: this.clock.now(), offset: this.committed };
    for await (const found of this.o.persistence.recover()) {
      const kf = new KeyFlow<S, V>(found.key, createdAt, this.journaling);
      await this.restore(kf, found);
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
   * when it has to wait: an async fold, a key read back from the store, a dead-letter sink.
   */
  handleBatch(messages: readonly InputMessage[]): void | Promise<void> {
    this.ensureHealthy();
    if (!this.recovered) throw new PartitionStateError('recover() must complete before the first batch');
    if (this.folding) throw new PartitionStateError('handleBatch called before the previous batch finished');
    if (messages.length === 0) return;
    const { topic, partition, o } = this;
    const { codec, filter, remapKey } = o;
    const policy = o.onDecodeFailure ?? 'fail';
    const now = this.clock.now();
    const touched = this.touched;
    touched.length = 0;
    let keyless = 0;
    let lastOffset = -1;
    this.toLoad = undefined;
    this.batch = messages;

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
            const kf = this.routeTo(key, now, offset);
            kf.enqueuePoisoned({ topic, partition, offset: m.offset, key, value: null as V, timestamp: m.timestamp, headers: m.headers ?? NO_HEADERS }, offset, error);
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
      this.routeTo(key, now, offset).enqueue(record, offset);
    }

    const toLoad = this.toLoad;
    this.toLoad = undefined;
    if (toLoad) return this.continueBatch(touched.slice(), now, lastOffset, keyless, toLoad);
    return this.foldTouched(touched, now, lastOffset, keyless);
  }

  /** Keys of this batch to read back from the store first (they were unloaded). */
  private toLoad: KeyFlow<S, V>[] | undefined;

  /** The key a record of this batch goes to: created (and marked to be read back if unloaded) when new. */
  private routeTo(key: string, now: number, offset: number): KeyFlow<S, V> {
    let kf = this.keys.get(key);
    if (kf === undefined) {
      kf = new KeyFlow<S, V>(key, { clock: now, offset }, this.journaling);
      this.registerFirstTimer(kf);
      this.keys.set(key, kf);
      if (this.unloaded.has(key)) {
        this.toLoad ??= [];
        this.toLoad.push(kf);
      }
    }
    if (kf.queued.length === 0) this.touched.push(kf);
    // A key that held nothing (a delete marker waiting for its purge) holds from its next record.
    if (kf.holding === undefined) kf.holding = offset;
    return kf;
  }

  private async continueBatch(
    touched: KeyFlow<S, V>[],
    now: number,
    lastOffset: number,
    keyless: number,
    toLoad: KeyFlow<S, V>[] | undefined,
  ): Promise<void> {
    this.folding = true;
    try {
      if (toLoad) {
        await Promise.all(
          toLoad.map(async (kf) => {
            const found = await this.o.persistence.read(kf.key);
            if (found) await this.restore(kf, found);
            this.unloaded.delete(kf.key);
          }),
        );
      }
    } catch (err) {
      this.folding = false;
      throw this.fail(err);
    }
    this.folding = false;
    await this.foldTouched(touched, now, lastOffset, keyless);
  }

  private foldTouched(touched: KeyFlow<S, V>[], now: number, lastOffset: number, keyless: number): void | Promise<void> {
    const fold = this.o.fold;
    let applied = 0;
    let queued = 0;
    let pending: Promise<number>[] | undefined;
    for (let i = 0; i < touched.length; i++) {
      const kf = touched[i]!;
      queued += kf.queued.length;
      let r: number | Promise<number>;
      try {
        r = kf.foldQueued(fold, now, this.poison, this.o.outputs);
      } catch (err) {
        throw this.fail(err);
      }
      if (typeof r === 'number') {
        applied += r;
      } else {
        pending ??= [];
        pending.push(r);
      }
    }
    if (pending) {
      this.folding = true;
      const keys = touched.slice();
      return Promise.all(pending).then(
        (counts) => {
          this.folding = false;
          for (const c of counts) applied += c;
          this.finishBatch(keys, lastOffset, keyless, applied, queued);
        },
        (err: unknown) => {
          this.folding = false;
          throw this.fail(err);
        },
      );
    }
    this.finishBatch(touched, lastOffset, keyless, applied, queued);
  }

  private finishBatch(touched: readonly KeyFlow<S, V>[], lastOffset: number, keyless: number, applied: number, queued: number): void {
    this.batch = [];
    for (let i = 0; i < touched.length; i++) {
      const kf = touched[i]!;
      if (kf.outputs !== undefined && this.outputsPendingSince === undefined) this.outputsPendingSince = this.clock.now();
      // A key whose fold returned no state and never had one since it was last written is
      // forgotten at once (a replay folds its records to no state again). One that had a state
      // keeps holding until its delete marker lands (a replay from its middle would differ), unless
      // nothing is persisted at all (transient).
      if (kf.state === undefined && !kf.stored && !this.writing.has(kf) && (!kf.dirty || this.o.mode === 'none')) this.keys.delete(kf.key);
    }
    if (lastOffset + 1 > this.nextOffset) this.nextOffset = lastOffset + 1;
    this.m.recordsFolded.inc(applied);
    if (queued > applied) this.m.recordsSkipped.inc(queued - applied);
    if (keyless > 0) this.m.keylessDropped.inc(keyless);
    this.m.keysLive.set(this.keys.size);
  }

  /**
   * Runs the per-key timers that are due at `now` (kafka-flow's triggerTimers): marks keys to
   * persist, and orphans to persist and unload, at the next `persist`.
   */
  triggerTimers(now: number = this.clock.now()): void {
    this.ensureHealthy();
    const current = { clock: now, offset: this.nextOffset };
    for (const kf of this.keys.values()) {
      if (kf.state === undefined || kf.timers.length === 0) continue;
      let fired = false;
      let kept = 0;
      for (const at of kf.timers) {
        if (at <= now) fired = true;
        else kf.timers[kept++] = at;
      }
      if (!fired) continue;
      kf.timers.length = kept;
      const decision = onTimer(this.policy, kf, current);
      if (decision.persist) kf.due = true;
      if (decision.unload) kf.unload = true;
      if (decision.registerAt !== undefined) kf.timers.push(decision.registerAt);
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
    return since !== undefined && this.failure === undefined && now >= since + (this.o.outputEvery ?? 1000);
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

  /** The key's in-memory state (undefined if unknown, unloaded or deleted). */
  stateOf(key: string): S | undefined {
    return this.keys.get(key)?.state;
  }

  /** The offset a key holds back from commit, if it is in memory. */
  holdingOf(key: string): string | undefined {
    const h = this.keys.get(key)?.holding;
    return h === undefined ? undefined : formatOffset(h);
  }

  /** Live keys and their states. */
  *states(): IterableIterator<[string, S]> {
    for (const [key, kf] of this.keys) if (kf.state !== undefined) yield [key, kf.state];
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
      if (kf.outputs !== undefined && kf.outputs.length > 0) {
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

    for (const kf of [...this.keys.values()]) {
      const hold = kf.holding ?? Number.POSITIVE_INFINITY;
      // A key still folding this batch (async) waits for the next persist.
      if (kf.queued.length > 0 || this.writing.has(kf)) {
        othersMin = Math.min(othersMin, hold);
        continue;
      }
      if (kf.state === undefined) {
        if (kf.dirty) {
          // Deleted by the fold since the last write: a delete marker, or less (decided below).
          deleted.push(kf);
        } else if (kf.stored && this.committed > kf.lastOffset) {
          // No replay can start at or below the marker any more: purge it.
          planned.push({ kf, version: kf.version, oldHold: hold, kind: 'purge', events: undefined, outputs: undefined });
        } else {
          // The marker stands for everything this key has seen: it holds nothing.
          kf.holding = undefined;
          if (!kf.stored) this.keys.delete(kf.key);
        }
        continue;
      }
      const selected =
        reason === 'periodic' ? kf.due || kf.unload : reason === 'outputs' ? kf.outputs !== undefined && kf.outputs.length > 0 : everything;
      if (!selected || (transient && !kf.unload && reason === 'periodic')) {
        othersMin = Math.min(othersMin, hold);
        continue;
      }
      if (transient || !kf.dirty) {
        // Nothing to write: everything before `capturedNext` is already persisted for this key
        // (or, transient, never will be: kafka-flow's no-op flush).
        kf.due = false;
        this.markPersisted(kf, now, capturedNext);
        if (kf.unload) {
          this.evict(kf);
          evicted++;
        } else {
          othersMin = Math.min(othersMin, capturedNext);
        }
        continue;
      }
      planned.push({ kf, version: kf.version, oldHold: hold, kind: 'put', events: this.takeEvents(kf), outputs: takeOutputs(kf) });
    }
    this.planDeletes(deleted, planned, othersMin);
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
      const commitOffset = bound.forChunk(from + chunk.length, chunk.some((p) => p.kind === 'put'), this.committed);
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
      for (let i = 0; i < chunk.length; i++) {
        const p = chunk[i]!;
        const status = result?.statuses[i];
        if (status === 'applied') {
          t.written++;
          if (p.kind !== 'put') t.deletes++;
          if (p.outputs) {
            for (const out of p.outputs) {
              if (out.kind === 'emitted') {
                t.outputs++;
                this.m.outputs(out.topic).inc();
              } else {
                t.deadLetters++;
                this.m.deadLetters(String(out.headers?.['kafka-flow-dead-letter-reason'] ?? 'unknown')).inc();
              }
            }
          }
          this.m.persistedKeys('applied').inc();
          if (this.landed(p, now, capturedNext)) t.evicted++;
        } else {
          t.failed++;
          this.m.persistedKeys(status === 'not-applied' ? 'not_applied' : 'failed').inc();
          if (status === 'not-applied') t.conflicts.push(p.kf.key);
          this.notLanded(p);
        }
        bound.stillHolds(this.keys.get(p.kf.key) === p.kf ? p.kf.holding : undefined);
      }
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
   * and the holds of deleted keys that get a marker (their write may fail too).
   */
  private planDeletes(deleted: readonly KeyFlow<S, V>[], planned: Planned<S, V>[], othersMin: number): void {
    if (deleted.length === 0) return;
    let floor = othersMin;
    for (const p of planned) if (p.oldHold < floor) floor = p.oldHold;
    // A key with dead letters to produce is written (a marker) whatever the offsets say.
    const marked = new Set<KeyFlow<S, V>>();
    for (const kf of deleted) {
      if (!kf.outputs?.length) continue;
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
      if (marked.has(kf)) planned.push({ kf, version: kf.version, oldHold: hold, kind: 'delete', events: this.takeEvents(kf), outputs: takeOutputs(kf) });
      else if (kf.stored) planned.push({ kf, version: kf.version, oldHold: hold, kind: 'purge', events: this.takeEvents(kf), outputs: takeOutputs(kf) });
      else {
        kf.events = kf.events ? [] : undefined;
        kf.holding = undefined;
        kf.persistedVersion = kf.version;
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
    const unchanged = kf.version === p.version && kf.queued.length === 0;
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
      if (kf.version === p.version) kf.persistedVersion = p.version;
      if (unchanged && kf.state === undefined) {
        kf.holding = undefined;
        kf.persistedAt = { clock: now, offset: capturedNext };
        return false;
      }
      // Revived by records folded while the delete was in flight: the new state is unpersisted.
      kf.holding = capturedNext;
      return false;
    }
    kf.stored = true;
    if (kf.version === p.version) kf.persistedVersion = p.version;
    kf.due = false;
    this.markPersisted(kf, now, capturedNext);
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
    if (kf.timers.length === 0 && Number.isFinite(this.policy.fireEvery)) kf.timers.push(this.clock.now() + this.policy.fireEvery);
    // A delete marker that did not land is written next time (the key keeps holding meanwhile).
    if (kf.state === undefined && !kf.stored && !kf.dirty && kf.queued.length === 0) this.keys.delete(kf.key);
  }

  private markPersisted(kf: KeyFlow<S, V>, now: number, capturedNext: number): void {
    kf.holding = capturedNext;
    kf.persistedAt = { clock: now, offset: capturedNext };
  }

  private evict(kf: KeyFlow<S, V>): void {
    kf.holding = undefined;
    this.keys.delete(kf.key);
    if (kf.stored) this.unloaded.add(kf.key);
  }

  private async restore(kf: KeyFlow<S, V>, found: RecoveredKey<S, V>): Promise<void> {
    kf.stored = true;
    if (found.snapshot) {
      kf.state = found.snapshot.state;
      kf.lastOffset = found.snapshot.offset;
    } else if (found.deleted) {
      kf.state = undefined;
      kf.lastOffset = found.deleted.offset;
    } else if (found.events) {
      await kf.replay(this.o.fold, found.events as FlowRecord<V>[]);
    }
    // A delete marker (or a journal that ends deleted) holds nothing — unless records for the key
    // are already queued (read back for a batch); records at or below its offset are skipped.
    if (kf.state === undefined && kf.queued.length === 0) kf.holding = undefined;
    kf.persistedVersion = kf.version;
  }

  private registerFirstTimer(kf: KeyFlow<S, V>): void {
    const at = firstTimerAt(this.policy, kf.createdAt);
    if (at !== undefined) kf.timers.push(at);
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

/** Persists that run on a timer (the workflow's, or outputEvery) and fail the partition when strict. */
function timed(reason: PersistReason): boolean {
  return reason === 'periodic' || reason === 'outputs';
}

function takeOutputs<S, V>(kf: KeyFlow<S, V>): OutputRecord[] | undefined {
  const taken = kf.outputs;
  kf.outputs = undefined;
  return taken && taken.length > 0 ? taken : undefined;
}

/** The message at `offset` in a batch (in offset order). */
function findMessage(batch: readonly InputMessage[], offset: string): InputMessage | undefined {
  const want = parseOffset(offset);
  let lo = 0;
  let hi = batch.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const at = parseOffset(batch[mid]!.offset);
    if (at === want) return batch[mid];
    if (at < want) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}
