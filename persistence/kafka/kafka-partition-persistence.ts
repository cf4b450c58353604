/**
 * The engine's PartitionPersistence over a compacted Kafka snapshot topic, for one input
 * partition, in one of two modes:
 *
 * - `transactional`: every batch is ONE Kafka transaction of this partition's producer
 *   (transactional.id `<prefix>-snapshot-<p>`): the snapshot records plus the input-offset commit
 *   under the consumer generation read live for each transaction. Every transaction commits an
 *   offset — the batch's, or the last committed one, seeded with the offset at assignment — so
 *   every write, the very first included, is gated by the broker's generation check (KIP-447). A
 *   fence stops the partition. A commit without an answer is not a rejection: the producer is
 *   rebuilt (its initialization settles the transaction) and the outcome is learned before going on.
 * - `caching`: a plain shared producer writes the records; the offset is then committed by the
 *   consumer (with its own generation) after the writes it covers. Unfenced: a stale owner's
 *   snapshots land (kafka-flow #732), only its offset commit is refused.
 *
 * Both keep each key's latest record bytes in memory (read back when the engine asks for a key it
 * unloaded) and write the same record format.
 */
import { decodeSnapshot } from '../../core/codec/errors';
import type { Logger } from '../../core/logger';
import { silentLogger } from '../../core/logger';
import { fenceReason, protocolErrorType, type SentRecords, SnapshotCommitTimeoutError } from '../../kafka/errors';
import type { CommitRequest, CommitResult, SnapshotMessage } from '../../kafka/transactional-writer';
import { SnapshotWriteFencedError } from '../../core/fence-errors';
import type { OffsetCommitter } from '../offset-committer';
import type { KeyWrite, PartitionPersistence, RecoveredKey, WriteBatch, WriteBatchResult } from '../../flow/ports';
import type { OutputSender } from '../output-sender';
import { isDeleteMarker, type OutputRecord, type TopicPartition, type WriteStatus } from '../../core/persistence-types';
import type { OutputTopics } from './dead-letter';
import { MissingGenerationError, RecoveryReadStalledError } from './errors';
import type { LocalDiscardCause, LocalPartitionStore, LocalUpdate } from './local-state';
import type { KafkaPersistenceMetrics } from './metrics';
import { readSnapshotPartition, type SnapshotLogReader, type StoredSnapshot } from './recovery';
import type { RestoreRound } from './restore-round';
import type { SnapshotFormat } from './snapshot-format';

/** The consumer generation a transaction commits its offset under. */
export interface WriteGeneration {
  readonly generationId: number;
  readonly memberId: string;
  /** The partitions this generation assigns to the member, by topic; when given, checked before each transaction. */
  readonly assignment?: Readonly<Record<string, readonly number[]>>;
}

/** Read for each transaction, never cached: a rebalance that keeps our partitions still bumps it. */
export type GenerationSource = () => WriteGeneration | undefined;

/** One partition's transactions (TransactionalWriter). */
export interface SnapshotTransactions {
  readonly transactionalId: string;
  init(): Promise<void>;
  commit(request: CommitRequest): Promise<CommitResult>;
  close(): Promise<void>;
}

/** The shared plain producer of caching mode (PlainWriter). */
export interface SnapshotSender {
  send(messages: readonly SnapshotMessage[]): Promise<SentRecords[]>;
}

/** Learns the outcome of a transaction whose commit went unanswered, once its producer was rebuilt. */
export interface OutcomeProbe {
  /** Whether the record at `sent.baseOffset` is visible to read_committed readers. */
  recordCommitted(sent: SentRecords): Promise<boolean>;
  /** The group's committed offset of the input partition (require_stable), undefined if none. */
  committedOffset(): Promise<number | undefined>;
}

interface Common<S> {
  readonly flow: string;
  readonly input: TopicPartition;
  readonly snapshotTopic: string;
  readonly format: SnapshotFormat<S>;
  readonly reader: SnapshotLogReader;
  readonly recoveryStallTimeoutMs: number;
  /** How often a recovery read without progress is logged; default 5 s. */
  readonly noticeEveryMs?: number;
  readonly maxWritesPerBatch: number;
  readonly logger?: Logger;
  readonly metrics?: KafkaPersistenceMetrics;
  /** Called once when a fence stops this partition. */
  readonly onFence?: (err: SnapshotWriteFencedError) => void;
  /** The local state store (transactional mode): restore from it plus the delta. See docs/local-state.md. */
  readonly local?: LocalStateHook;
  /** Where the writes' outputs (dead letters) go: in the transaction (transactional), or produced first (caching). */
  readonly outputs?: OutputTopics;
}

/** A partition's local state store and what its restore checks need. */
export interface LocalStateHook {
  readonly store: LocalPartitionStore;
  /** The snapshot topic's delete.retention.ms: tombstones older than that may be compacted away. */
  readonly deleteRetentionMs: () => Promise<number>;
  /** The worker-wide summary of a rebalance's restores. */
  readonly round?: RestoreRound;
  readonly now?: () => number;
}

export interface TransactionalModeOptions<S> extends Common<S> {
  readonly mode: 'transactional';
  readonly transactions: SnapshotTransactions;
  readonly generation: GenerationSource;
  /** The group's committed offset at assignment: seeds the offset every transaction commits (see seedOffset). */
  readonly assignedOffset: number;
  readonly probe: OutcomeProbe;
}

export interface CachingModeOptions<S> extends Common<S> {
  readonly mode: 'caching';
  readonly sender: SnapshotSender;
  /** Produces outputs (dead letters) before the snapshots: at least once. */
  readonly outputSender?: OutputSender;
  /** Commits the input offset with the consumer's generation. */
  readonly committer: OffsetCommitter;
}

export type KafkaPartitionPersistenceOptions<S> = TransactionalModeOptions<S> | CachingModeOptions<S>;

/** What the last recovery did (the workflow status shows it). */
export interface RecoveryStats {
  readonly snapshotTopic: string;
  readonly partition: number;
  readonly fromOffset: string;
  readonly bound: string;
  readonly lastStableAtStart: string;
  /** The read had to wait for open transactions (the last stable offset was below the bound). */
  readonly waitedForOpenTransactions: boolean;
  readonly keys: number;
  readonly records: number;
  readonly tombstones: number;
  readonly bytes: number;
  readonly fetches: number;
  /** The fence (producer initialization) before the read; 0 in caching mode. */
  readonly fenceMs: number;
  readonly readMs: number;
  readonly ms: number;
  /** Keys taken from the local state store (0 without one). */
  readonly fromLocal: number;
  /** Records read from the snapshot topic (the delta after a checkpoint, or everything). */
  readonly fromTopic: number;
  /** Local state on: `delta` (local state plus the records after its checkpoint) or `full` (the whole partition). */
  readonly restore?: 'delta' | 'full';
  /** Why the local state could not be used (no checkpoint, or why it was discarded). */
  readonly fullRestoreReason?: string;
}

export interface PersistenceStats {
  /** Transactions committed (caching mode: batches sent). */
  transactions: number;
  /** Snapshot records (puts and tombstones) that landed. */
  records: number;
  fences: number;
  commitTimeouts: number;
}

interface Prepared {
  /** The snapshot topic's records (puts, markers, tombstones), in `updates` order. */
  readonly messages: SnapshotMessage[];
  /** Records to produce with them (dead letters). */
  readonly outputs: OutputRecord[];
  /** Each key's change, in message order (offset WRITTEN_HERE until the records' offsets are known). */
  readonly updates: Array<[string, StoredSnapshot | undefined]>;
  readonly puts: number;
  readonly tombstones: number;
}

interface Unsettled {
  readonly error: SnapshotCommitTimeoutError;
  readonly offset: number;
  readonly prepared: Prepared;
}

const WRITTEN_HERE = 'written by this process';

export class KafkaPartitionPersistence<S, V = unknown> implements PartitionPersistence<S, V> {
  readonly maxWritesPerBatch: number;
  readonly mode: 'transactional' | 'caching';
  readonly stats: PersistenceStats = { transactions: 0, records: 0, fences: 0, commitTimeouts: 0 };
  private readonly o: KafkaPartitionPersistenceOptions<S>;
  private readonly log: Logger;
  private readonly labels: { flow: string; topic: string; partition: string };
  private snapshots = new Map<string, StoredSnapshot>();
  private offsetToCommit: number;
  private fence: SnapshotWriteFencedError | undefined;
  private unsettled: Unsettled | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private fenceMs = 0;
  private recovery: RecoveryStats | undefined;
  /** Local state: the offset the next transaction's records must start at for the checkpoint to advance. */
  private localExpect: bigint | undefined;
  /** Local writes, in order (each one LMDB transaction). */
  private localChain: Promise<unknown> = Promise.resolve();
  private localBroken = false;

  constructor(options: KafkaPartitionPersistenceOptions<S>) {
    if (!(options.maxWritesPerBatch >= 1)) throw new RangeError(`maxWritesPerBatch must be at least 1, got ${options.maxWritesPerBatch}`);
    this.o = options;
    this.mode = options.mode;
    this.maxWritesPerBatch = options.maxWritesPerBatch;
    this.log = options.logger ?? silentLogger;
    this.labels = { flow: options.flow, topic: options.input.topic, partition: String(options.input.partition) };
    this.offsetToCommit = options.mode === 'transactional' ? options.assignedOffset : 0;
  }

  /** The transactional.id of this partition's producer (transactional mode). */
  get transactionalId(): string | undefined {
    return this.o.mode === 'transactional' ? this.o.transactions.transactionalId : undefined;
  }

  /** The last recovery's counts and durations, once `recover()` has run. */
  get lastRecovery(): RecoveryStats | undefined {
    return this.recovery;
  }

  /** Why this partition stopped writing, if a fence stopped it. */
  get fenced(): SnapshotWriteFencedError | undefined {
    return this.fence;
  }

  /** The offset every transaction commits at least (seeded at assignment). */
  get committedOffset(): number {
    return this.offsetToCommit;
  }

  /**
   * Sets the offset every transaction commits at least, before the first write: the group's
   * committed offset at assignment, read after the fence (so no earlier owner's transaction is
   * still pending). Seeded, even the very first transaction carries an offset and is gated.
   */
  seedOffset(offset: number): void {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`cannot seed with offset ${offset}`);
    this.offsetToCommit = offset;
  }

  /**
   * Transactional mode: initializes the partition's producer, which fences every earlier producer
   * of its transactional.id and aborts whatever transaction a crashed owner left open. Call before
   * recovering (the backend's forPartition does).
   */
  async fenceNow(): Promise<number> {
    if (this.o.mode !== 'transactional') return 0;
    const started = performance.now();
    try {
      await this.o.transactions.init();
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) throw this.onFence(err);
      throw err;
    }
    this.fenceMs = performance.now() - started;
    this.log.info({ ...this.where(), transactionalId: this.o.transactions.transactionalId, ms: Math.round(this.fenceMs) }, 'snapshot producer initialized (fence)');
    return this.fenceMs;
  }

  async *recover(): AsyncIterable<RecoveredKey<S, V>> {
    const started = performance.now();
    const { reader, snapshotTopic, input } = this.o;
    const local = this.o.mode === 'transactional' ? this.o.local : undefined;
    local?.round?.begin();
    let restored = false;
    try {
      const fromLocal = local ? await this.loadLocal(local) : undefined;
      let read: Awaited<ReturnType<typeof readSnapshotPartition>>;
      try {
        read = await readSnapshotPartition({
          reader,
          topic: snapshotTopic,
          partition: input.partition,
          stallTimeoutMs: this.o.recoveryStallTimeoutMs,
          noticeEveryMs: this.o.noticeEveryMs,
          fromOffset: fromLocal?.kind === 'loaded' ? fromLocal.checkpoint : undefined,
          logger: this.log,
        });
      } catch (err) {
        if (err instanceof RecoveryReadStalledError) {
          this.o.metrics?.recoveryStalls.inc({ ...this.labels, cause: err.cause });
          this.log.error({ ...this.where(), cause: err.cause, err }, 'snapshot recovery read stalled');
        }
        throw err;
      }
      const readMs = performance.now() - started;
      const localKeys = fromLocal?.kind === 'loaded' ? fromLocal.entries.size : 0;
      if (local && fromLocal?.kind === 'loaded') {
        // Local copy + delta: tombstones delete locally, every record of the delta overwrites.
        const merged = fromLocal.entries;
        const updates: LocalUpdate[] = [];
        const previous = new Map<string, StoredSnapshot | undefined>();
        for (const key of read.deleted) {
          previous.set(key, merged.get(key));
          updates.push([key, undefined]);
          merged.delete(key);
        }
        for (const [key, stored] of read.snapshots) {
          previous.set(key, merged.get(key));
          updates.push([key, stored]);
          merged.set(key, stored);
        }
        this.snapshots = merged;
        this.localWrite(local, updates, (k) => previous.get(k), read.bound);
      } else {
        this.snapshots = read.snapshots;
        if (local) this.localWrite(local, [...read.snapshots], () => undefined, read.bound);
      }
      this.localExpect = local ? BigInt(read.bound) : undefined;
      const ms = this.fenceMs + readMs;
      this.recovery = {
        snapshotTopic,
        partition: input.partition,
        fromOffset: read.fromOffset,
        bound: read.bound,
        lastStableAtStart: read.lastStableAtStart,
        waitedForOpenTransactions: BigInt(read.lastStableAtStart) < BigInt(read.bound),
        keys: this.snapshots.size,
        records: read.records,
        tombstones: read.tombstones,
        bytes: read.bytes,
        fetches: read.fetches,
        fenceMs: this.fenceMs,
        readMs,
        ms,
        fromLocal: localKeys,
        fromTopic: read.records,
        restore: local ? (fromLocal?.kind === 'loaded' ? 'delta' : 'full') : undefined,
        fullRestoreReason: fromLocal && fromLocal.kind !== 'loaded' ? fromLocal.reason : undefined,
      };
      this.o.metrics?.recoveryDuration.observe(this.labels, ms / 1000);
      this.o.metrics?.recoveredKeys.inc(this.labels, this.snapshots.size);
      if (local) {
        const m = this.o.metrics;
        const kind = this.recovery.restore ?? 'full';
        m?.restores.inc({ ...this.labels, kind, reason: fromLocal?.kind === 'loaded' ? 'checkpoint' : (fromLocal?.cause ?? 'none') });
        m?.restoreLocalKeys.inc(this.labels, localKeys);
        m?.restoreTopicRecords.inc({ ...this.labels, kind }, read.records);
        this.log.info(
          { ...this.where(), fromLocal: localKeys, fromTopic: read.records, keys: this.snapshots.size, fromOffset: read.fromOffset, bound: read.bound, ms: Math.round(ms) },
          `restored ${snapshotTopic}-${input.partition}: ${localKeys} from local state, ${read.records} from the topic, ${Math.round(ms)} ms`,
        );
        local.round?.end({ fromLocal: localKeys, fromTopic: read.records, full: kind === 'full' });
        restored = true;
      }
    } finally {
      if (local && !restored) local.round?.end(undefined);
    }
    for (const [key, stored] of [...this.snapshots]) yield this.recovered(key, stored);
  }

  private recovered(key: string, stored: StoredSnapshot): RecoveredKey<S, V> {
    const decoded = this.decode(key, stored);
    return isDeleteMarker(decoded) ? { key, deleted: { offset: decoded.offset } } : { key, snapshot: decoded };
  }

  /** The local copy and its checkpoint if they can be trusted; otherwise why not (and the store is emptied). */
  private async loadLocal(
    local: LocalStateHook,
  ): Promise<{ kind: 'loaded'; entries: Map<string, StoredSnapshot>; checkpoint: string } | { kind: 'full'; cause: LocalDiscardCause | 'none'; reason: string }> {
    const { snapshotTopic, input, reader } = this.o;
    const tp = `${snapshotTopic}-${input.partition}`;
    const loaded = await local.store.load();
    let untrusted: { cause: LocalDiscardCause; reason: string } | undefined;
    if (loaded.kind === 'untrusted') untrusted = loaded;
    else if (loaded.kind === 'loaded') {
      const c = loaded.checkpoint;
      const checkpoint = BigInt(c.checkpoint);
      const logStart = BigInt(await reader.logStartOffset(snapshotTopic, input.partition));
      const logEnd = BigInt(await reader.logEndOffset(snapshotTopic, input.partition));
      const age = (local.now ?? Date.now)() - c.currentAt;
      const retention = await local.deleteRetentionMs();
      if (checkpoint < logStart) untrusted = { cause: 'log-start', reason: `checkpoint ${checkpoint} is below the log start offset ${logStart}` };
      else if (checkpoint > logEnd) untrusted = { cause: 'beyond-log-end', reason: `checkpoint ${checkpoint} is beyond the log end offset ${logEnd} (topic recreated or truncated?)` };
      else if (age > retention) {
        untrusted = { cause: 'retention', reason: `checkpoint last current ${Math.round(age / 1000)} s ago, longer than delete.retention.ms ${retention} (tombstones may be gone)` };
      } else {
        this.log.info({ ...this.where(), checkpoint: c.checkpoint, keys: loaded.entries.size }, `local state of ${tp}: ${loaded.entries.size} keys, checkpoint ${c.checkpoint}`);
        return { kind: 'loaded', entries: loaded.entries, checkpoint: c.checkpoint };
      }
    }
    if (untrusted) {
      this.log.warn({ ...this.where(), cause: untrusted.cause, reason: untrusted.reason, path: local.store.path }, `local state of ${tp} discarded: ${untrusted.reason}; restoring from the start of ${tp}`);
      this.o.metrics?.localStateDiscarded.inc({ ...this.labels, cause: untrusted.cause });
    } else {
      this.log.info({ ...this.where(), path: local.store.path }, `no checkpoint, restoring from the start of ${tp}`);
    }
    await local.store.discard();
    return untrusted ? { kind: 'full', ...untrusted } : { kind: 'full', cause: 'none', reason: 'no checkpoint' };
  }

  /** Queues one local write (one LMDB transaction: entries and checkpoint); a failure stops mirroring, never the partition. */
  private localWrite(local: LocalStateHook, updates: readonly LocalUpdate[], previous: (key: string) => StoredSnapshot | undefined, checkpoint: string | undefined): void {
    if (this.localBroken) return;
    this.localChain = this.localChain
      .then(() => (this.localBroken ? undefined : local.store.write(updates, previous, checkpoint, (local.now ?? Date.now)())))
      .catch((err) => {
        this.localBroken = true;
        this.o.metrics?.localStateWriteFailures.inc(this.labels);
        this.log.warn(
          { ...this.where(), err, path: local.store.path },
          'local state write failed: the local copy stays at its last checkpoint (the next restore reads more of the topic)',
        );
      });
  }

  async read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    const stored = this.snapshots.get(key);
    return stored ? this.recovered(key, stored) : undefined;
  }

  write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    // One transaction in flight per partition, whoever calls.
    const run = this.chain.then(() => (this.o.mode === 'transactional' ? this.writeTransactional(batch, this.o) : this.writeCaching(batch, this.o)));
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Disconnects this partition's producer (transactional mode); an open transaction is left to the next owner's fence. */
  async close(): Promise<void> {
    await this.chain;
    if (this.o.mode === 'transactional') {
      await this.o.transactions.close();
      if (this.o.local) {
        await this.localChain;
        await this.o.local.store.close();
      }
    }
  }

  /** Resolves once every queued local write has committed (tests, benchmarks). */
  async localWritesDone(): Promise<void> {
    await this.localChain;
  }

  // ---- transactional ----------------------------------------------------------------------------

  private async writeTransactional(batch: WriteBatch<S, V>, o: TransactionalModeOptions<S>): Promise<WriteBatchResult> {
    if (this.fence) throw this.fence;
    if (this.unsettled) await this.settle(o);
    const generation = this.liveGeneration(o);
    const offset = Math.max(this.offsetToCommit, batch.commitOffset ?? 0);
    const prepared = this.prepare(batch.writes);
    const started = performance.now();
    const outputs = prepared.outputs.length > 0 ? await this.outputMessages(prepared.outputs) : [];
    let result: CommitResult;
    try {
      result = await o.transactions.commit({
        messages: outputs.length > 0 ? [...prepared.messages, ...outputs] : prepared.messages,
        offsets: [{ topic: o.input.topic, partition: o.input.partition, offset: String(offset) }],
        generation: { generationId: generation.generationId, memberId: generation.memberId },
      });
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) {
        this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'fenced' });
        throw this.onFence(err);
      }
      if (err instanceof SnapshotCommitTimeoutError) {
        this.stats.commitTimeouts++;
        this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'timeout' });
        this.log.warn({ ...this.where(), err }, 'snapshot transaction commit got no answer: rebuilding the producer to learn its outcome');
        this.unsettled = { error: err, offset, prepared };
        if ((await this.settle(o)) === 'committed') return this.landed(batch, prepared, offset, started, undefined);
      } else {
        this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'failed' });
      }
      throw err;
    }
    this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'committed' });
    return this.landed(batch, prepared, offset, started, result.sent);
  }

  /** `sent`: where the records landed; undefined when settle() applied them already. */
  private landed(batch: WriteBatch<S, V>, prepared: Prepared, offset: number, started: number, sent: readonly SentRecords[] | undefined): WriteBatchResult {
    if (sent) this.applyLanded(prepared, sent);
    this.offsetToCommit = Math.max(this.offsetToCommit, offset);
    this.count(prepared, started);
    return { statuses: applied(batch.writes), committed: batch.commitOffset !== undefined };
  }

  /**
   * A commit went unanswered: rebuild the producer (its initialization completes or aborts the
   * pending transaction), then find out which it was. Stays unsettled (and every write waits for
   * it) until the outcome is known.
   */
  private async settle(o: TransactionalModeOptions<S>): Promise<'committed' | 'aborted'> {
    const u = this.unsettled!;
    try {
      await o.transactions.init();
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) {
        this.unsettled = undefined; // a newer owner settled it; nothing more of ours will land
        throw this.onFence(err);
      }
      throw err;
    }
    const ours = u.error.sent.find((s) => s.topic === o.snapshotTopic && s.partition === o.input.partition);
    let committed: boolean;
    if (ours) committed = await o.probe.recordCommitted(ours);
    else if (u.offset <= this.offsetToCommit) committed = true; // it re-committed a committed offset: nothing to learn
    else committed = ((await o.probe.committedOffset()) ?? -1) >= u.offset;
    this.unsettled = undefined;
    const outcome = committed ? 'committed' : 'aborted';
    this.o.metrics?.commitTimeouts.inc({ ...this.labels, outcome });
    if (committed) {
      this.applyLanded(u.prepared, u.error.sent);
      this.offsetToCommit = Math.max(this.offsetToCommit, u.offset);
    }
    this.log.warn({ ...this.where(), outcome, offset: u.offset }, `the unanswered snapshot transaction was ${outcome}`);
    return outcome;
  }

  private liveGeneration(o: TransactionalModeOptions<S>): WriteGeneration {
    const g = o.generation();
    if (!g || !Number.isInteger(g.generationId) || g.generationId < 0 || !g.memberId) {
      throw new MissingGenerationError(o.input.topic, o.input.partition);
    }
    if (g.assignment && !(g.assignment[o.input.topic] ?? []).includes(o.input.partition)) {
      throw this.onFence(
        new SnapshotWriteFencedError(o.input.topic, o.input.partition, `generation ${g.generationId} does not assign the partition to member ${g.memberId}`, {
          reason: 'not-assigned',
          transactionalId: o.transactions.transactionalId,
        }),
      );
    }
    return g;
  }

  // ---- caching ----------------------------------------------------------------------------------

  private async writeCaching(batch: WriteBatch<S, V>, o: CachingModeOptions<S>): Promise<WriteBatchResult> {
    if (this.fence) throw this.fence;
    const prepared = this.prepare(batch.writes);
    const started = performance.now();
    if (prepared.outputs.length > 0) {
      if (!o.outputSender) throw new TypeError('caching mode without an output sender cannot produce dead letters');
      await o.outputSender.send(prepared.outputs, o.input);
    }
    if (prepared.messages.length > 0) {
      try {
        await o.sender.send(prepared.messages);
      } catch (err) {
        this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'failed' });
        throw err;
      }
      this.apply(prepared.updates);
      this.o.metrics?.transactions.inc({ ...this.labels, outcome: 'committed' });
    }
    this.count(prepared, started);
    const statuses = applied(batch.writes);
    if (batch.commitOffset === undefined) return { statuses, committed: false };
    try {
      await o.committer.commit(o.input, batch.commitOffset);
      return { statuses, committed: true };
    } catch (err) {
      const reason = fenceReason(err);
      const failure = reason
        ? this.onFence(
            new SnapshotWriteFencedError(o.input.topic, o.input.partition, `${protocolErrorType(err) ?? 'fenced'} on the consumer's offset commit`, {
              reason,
              cause: err,
            }),
          )
        : err;
      if (batch.writes.length === 0) throw failure;
      return { statuses, committed: false, commitError: failure };
    }
  }

  // ---- shared -----------------------------------------------------------------------------------

  private prepare(writes: readonly KeyWrite<S, V>[]): Prepared {
    const { snapshotTopic, input, format } = this.o;
    const messages: SnapshotMessage[] = [];
    const outputs: OutputRecord[] = [];
    const updates: Array<[string, StoredSnapshot | undefined]> = [];
    let puts = 0;
    let tombstones = 0;
    for (const w of writes) {
      if (w.outputs) outputs.push(...w.outputs);
      if (w.purge) {
        messages.push({ topic: snapshotTopic, partition: input.partition, key: w.key, value: null });
        updates.push([w.key, undefined]);
        tombstones++;
      } else if (w.delete) {
        const bytes = format.encodeMarker({ deleted: true, offset: w.delete.offset });
        messages.push({ topic: snapshotTopic, partition: input.partition, key: w.key, value: bytes });
        updates.push([w.key, { bytes, offset: WRITTEN_HERE }]);
        puts++;
      } else if (w.snapshot) {
        const bytes = format.encode(w.snapshot);
        messages.push({ topic: snapshotTopic, partition: input.partition, key: w.key, value: bytes });
        updates.push([w.key, { bytes, offset: WRITTEN_HERE }]);
        puts++;
      }
    }
    return { messages, outputs, updates, puts, tombstones };
  }

  private outputMessages(outputs: readonly OutputRecord[]): Promise<SnapshotMessage[]> {
    if (!this.o.outputs) throw new TypeError('this partition has no output topics: it cannot produce dead letters');
    return this.o.outputs.messages(outputs, this.o.input);
  }

  private apply(updates: readonly (readonly [string, StoredSnapshot | undefined])[]): void {
    for (const [key, stored] of updates) {
      if (stored) this.snapshots.set(key, stored);
      else this.snapshots.delete(key);
    }
  }

  /**
   * A transaction landed: its records get their offsets, the in-memory copy its updates, and the
   * local store (if any) the same updates in one LMDB transaction with the new checkpoint — which
   * advances to just after our records only when they start exactly where the checkpoint expects
   * (after the recovery bound, or after our previous transaction's commit marker). Anything else in
   * between (an aborted transaction's records, a foreign writer) holds the checkpoint where it is:
   * still correct, the next restore reads a little more.
   */
  private applyLanded(prepared: Prepared, sent: readonly SentRecords[]): void {
    const ours = sent.find((x) => x.topic === this.o.snapshotTopic && x.partition === this.o.input.partition);
    const updates = ours
      ? prepared.updates.map(([key, stored], i): [string, StoredSnapshot | undefined] => [
          key,
          stored ? { bytes: stored.bytes, offset: String(BigInt(ours.baseOffset) + BigInt(i)) } : undefined,
        ])
      : prepared.updates;
    const local = this.o.mode === 'transactional' ? this.o.local : undefined;
    if (!local || this.localBroken) {
      this.apply(updates);
      return;
    }
    const previous = new Map<string, StoredSnapshot | undefined>();
    for (const [key] of updates) if (!previous.has(key)) previous.set(key, this.snapshots.get(key));
    this.apply(updates);
    let checkpoint: string | undefined;
    if (ours) {
      const base = BigInt(ours.baseOffset);
      if (this.localExpect !== undefined && base === this.localExpect && ours.count === prepared.messages.length) {
        const end = base + BigInt(ours.count);
        checkpoint = String(end);
        this.localExpect = end + 1n; // our commit marker takes the next offset
      } else if (this.localExpect !== undefined) {
        this.log.info(
          { ...this.where(), expected: String(this.localExpect), baseOffset: ours.baseOffset, checkpoint: local.store.lastCheckpoint },
          'local state checkpoint held: records between the checkpoint and this transaction that this process did not write',
        );
        this.localExpect = undefined; // held for the rest of this ownership
      }
    } else if (prepared.messages.length > 0) {
      this.localExpect = undefined; // records landed where we cannot tell: hold
    }
    this.localWrite(local, updates, (k) => previous.get(k), checkpoint);
  }

  private count(prepared: Prepared, started: number): void {
    this.stats.transactions++;
    this.stats.records += prepared.messages.length;
    const m = this.o.metrics;
    if (!m) return;
    m.transactionDuration.observe(this.labels, (performance.now() - started) / 1000);
    if (prepared.puts > 0) m.records.inc({ ...this.labels, kind: 'put' }, prepared.puts);
    if (prepared.tombstones > 0) m.records.inc({ ...this.labels, kind: 'tombstone' }, prepared.tombstones);
  }

  private onFence(err: SnapshotWriteFencedError): SnapshotWriteFencedError {
    if (this.fence === undefined) {
      this.fence = err;
      this.stats.fences++;
      this.o.metrics?.fences.inc({ ...this.labels, reason: err.reason ?? 'unknown' });
      this.log.warn({ ...this.where(), reason: err.reason, err }, 'snapshot writes fenced: this partition stops here until its next assignment');
      this.o.onFence?.(err);
    }
    return err;
  }

  private decode(key: string, stored: StoredSnapshot) {
    return decodeSnapshot(this.o.format, stored.bytes, {
      topic: this.o.snapshotTopic,
      partition: this.o.input.partition,
      key,
      offset: stored.offset,
    });
  }

  private where() {
    return { flow: this.o.flow, topic: this.o.input.topic, partition: this.o.input.partition, snapshotTopic: this.o.snapshotTopic };
  }
}

function applied(writes: readonly unknown[]): WriteStatus[] {
  return new Array<WriteStatus>(writes.length).fill('applied');
}
