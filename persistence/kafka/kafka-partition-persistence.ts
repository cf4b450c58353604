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
 * unloaded) and write the same record format — or, with local state read on demand (a bounded
 * state cache), in the local store (store-snapshot-cache.ts).
 *
 * This class is the port's face; the work is done by parts with one job each: the mode's writer
 * (transactional-snapshot-writer.ts, caching-snapshot-writer.ts, over snapshot-writer.ts and
 * snapshot-batch.ts), the cache of each key's latest record (snapshot-cache.ts), the restorer
 * (snapshot-restorer.ts) and, with local state, the owner of the local store and its checkpoint
 * (local-state-manager.ts).
 */
import type { SnapshotWriteFencedError } from '../../core/fence-errors';
import type { Logger } from '../../core/logger';
import { silentLogger } from '../../core/logger';
import type { TopicPartition } from '../../core/persistence-types';
import type { DueKeys, DueLook, PartitionPersistence, RecoveredKey, RestoreProgress, WriteBatch, WriteBatchResult } from '../../flow/ports';
import { CachingSnapshotWriter, type CachingWriterParts } from './caching-snapshot-writer';
import type { OutputTopics } from './dead-letter';
import { type LocalStateHook, LocalStateManager } from './local-state-manager';
import type { KafkaPersistenceMetrics } from './metrics';
import type { SnapshotLogReader, StoredSnapshot } from './recovery';
import { SnapshotCache } from './snapshot-cache';
import { StoreSnapshotCache } from './store-snapshot-cache';
import type { SnapshotFormat } from './snapshot-format';
import { type RecoveryStats, SnapshotRestorer } from './snapshot-restorer';
import type { PersistenceStats, SnapshotWriter } from './snapshot-writer';
import {
  type GenerationSource,
  type OutcomeProbe,
  type SnapshotTransactions,
  TransactionalSnapshotWriter,
} from './transactional-snapshot-writer';

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
  /** The local state store: restore from it plus the delta. See docs/local-state.md. */
  readonly local?: LocalStateHook;
  /** Where the writes' outputs (dead letters) go: in the transaction (transactional), or produced first (caching). */
  readonly outputs?: OutputTopics;
}

export interface TransactionalModeOptions<S> extends Common<S> {
  readonly mode: 'transactional';
  readonly transactions: SnapshotTransactions;
  readonly generation: GenerationSource;
  /** The group's committed offset at assignment: seeds the offset every transaction commits (see seedOffset). */
  readonly assignedOffset: number;
  readonly probe: OutcomeProbe;
}

export interface CachingModeOptions<S> extends Common<S>, CachingWriterParts {
  readonly mode: 'caching';
}

export type KafkaPartitionPersistenceOptions<S> = TransactionalModeOptions<S> | CachingModeOptions<S>;

export class KafkaPartitionPersistence<S, V = unknown> implements PartitionPersistence<S, V> {
  readonly maxWritesPerBatch: number;
  readonly mode: 'transactional' | 'caching';
  private readonly cache: SnapshotCache<S>;
  private readonly writer: SnapshotWriter<S, V>;
  private readonly transactional: TransactionalSnapshotWriter<S, V> | undefined;
  private readonly local: LocalStateManager | undefined;
  private readonly restorer: SnapshotRestorer;
  private chain: Promise<unknown> = Promise.resolve();
  private recovery: RecoveryStats | undefined;
  /**
   * Keys are read from the local store on demand (a bounded state cache): whether it has state
   * for a key the engine does not hold; `recover()` then yields no keys. Undefined otherwise.
   */
  readonly has?: (key: string) => boolean;
  /** With `has`: the keys out of memory with a timer due, read now (the local store's due-time index). */
  readonly readDue?: (look: DueLook) => DueKeys<S, V>;
  /** With `has`: one key read now from the local store (or the changes not in it yet). */
  readonly readNow?: (key: string) => RecoveredKey<S, V> | undefined;

  constructor(options: KafkaPartitionPersistenceOptions<S>) {
    if (!(options.maxWritesPerBatch >= 1)) throw new RangeError(`maxWritesPerBatch must be at least 1, got ${options.maxWritesPerBatch}`);
    this.mode = options.mode;
    this.maxWritesPerBatch = options.maxWritesPerBatch;
    const log = options.logger ?? silentLogger;
    const { flow, input, snapshotTopic, format, reader, metrics } = options;
    const where = { format, snapshotTopic, partition: input.partition };
    const onDemand = options.local?.onDemand === true ? new StoreSnapshotCache<S>(where, options.local.store) : undefined;
    this.cache = onDemand ?? new SnapshotCache<S>(where);
    if (onDemand) {
      this.has = (key) => onDemand.has(key);
      const readNow = (key: string): RecoveredKey<S, V> | undefined => {
        const stored = onDemand.get(key);
        return stored ? onDemand.recovered<V>(key, stored) : undefined;
      };
      this.readNow = readNow;
      this.readDue = (look) => {
        const due = onDemand.dueKeys(look);
        const keys: RecoveredKey<S, V>[] = [];
        for (const key of due.keys) {
          const found = readNow(key);
          if (found) keys.push(found);
        }
        return { keys, next: due.next };
      };
    }
    const context = { flow, input, snapshotTopic, format, cache: this.cache, log, metrics, onFence: options.onFence };
    const commitMarkers = options.mode === 'transactional';
    this.local = options.local ? new LocalStateManager(options.local, { flow, input, snapshotTopic, reader, log, metrics, commitMarkers }) : undefined;
    if (this.local && onDemand) this.local.listener = onDemand;
    if (options.mode === 'transactional') {
      this.transactional = new TransactionalSnapshotWriter<S, V>(context, {
        transactions: options.transactions,
        generation: options.generation,
        probe: options.probe,
        outputs: options.outputs,
        local: this.local,
      });
      this.transactional.offsetToCommit = options.assignedOffset;
      this.writer = this.transactional;
    } else {
      this.writer = new CachingSnapshotWriter<S, V>(context, { ...options, mirror: this.local });
    }
    this.restorer = new SnapshotRestorer({
      flow,
      input,
      snapshotTopic,
      reader,
      recoveryStallTimeoutMs: options.recoveryStallTimeoutMs,
      noticeEveryMs: options.noticeEveryMs,
      log,
      metrics,
      local: this.local,
    });
  }

  /** Writes, records and fences of this partition so far. */
  get stats(): PersistenceStats {
    return this.writer.stats;
  }

  /** Writes and the offset commit are one transaction (transactional mode). */
  get atomicCommit(): boolean {
    return this.mode === 'transactional';
  }

  /** The transactional.id of this partition's producer (transactional mode). */
  get transactionalId(): string | undefined {
    return this.transactional?.transactionalId;
  }

  /** The local store's checkpoint (snapshot-partition offset), with local state, once restored. */
  get localCheckpoint(): string | undefined {
    return this.local?.hook.store.lastCheckpoint;
  }

  /** The last recovery's counts and durations, once `recover()` has run. */
  get lastRecovery(): RecoveryStats | undefined {
    return this.recovery;
  }

  /** Why this partition stopped writing, if a fence stopped it. */
  get fenced(): SnapshotWriteFencedError | undefined {
    return this.writer.fenced;
  }

  /** The offset every transaction commits at least (seeded at assignment). */
  get committedOffset(): number {
    return this.writer.offsetToCommit;
  }

  /**
   * Sets the offset every transaction commits at least, before the first write: the group's
   * committed offset at assignment, read after the fence (so no earlier owner's transaction is
   * still pending). Seeded, even the very first transaction carries an offset and is gated.
   */
  seedOffset(offset: number): void {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`cannot seed with offset ${offset}`);
    this.writer.offsetToCommit = offset;
  }

  /**
   * Transactional mode: initializes the partition's producer, which fences every earlier producer
   * of its transactional.id and aborts whatever transaction a crashed owner left open. Call before
   * recovering (the backend's forPartition does).
   */
  async fenceNow(): Promise<number> {
    // The local store is opened and checked meanwhile (LocalStateManager.preload): nothing of it
    // depends on the fence. The snapshot read that follows still comes after it.
    this.local?.preload();
    return this.transactional ? this.transactional.fenceNow() : 0;
  }

  recover(): AsyncIterable<RecoveredKey<S, V>> {
    return { [Symbol.asyncIterator]: () => this.recovering() };
  }

  /** How far the running recovery's read of the snapshot partition is. */
  restoreProgress(): RestoreProgress | undefined {
    return this.restorer.progress;
  }

  /**
   * The keys one by one once the read is done. An iterator rather than an async generator: a
   * generator's yield awaits each key (two microtasks per key; 100,000 keys cost ≈ 10 ms more).
   */
  private recovering(): AsyncIterator<RecoveredKey<S, V>> {
    let keys: IterableIterator<[string, StoredSnapshot]> | undefined;
    const next = (): IteratorResult<RecoveredKey<S, V>> => {
      const entry = keys!.next();
      return entry.done ? { value: undefined, done: true } : { value: this.cache.recovered<V>(entry.value[0], entry.value[1]), done: false };
    };
    return {
      next: async () => {
        if (keys) return next();
        const restored = await this.restorer.restore(this.transactional?.fenceMs ?? 0);
        if (restored.entries) this.cache.replace(restored.entries);
        this.recovery = restored.stats;
        keys = this.cache.all();
        return next();
      },
    };
  }

  async read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    const stored = this.cache.get(key);
    return stored ? this.cache.recovered<V>(key, stored) : undefined;
  }

  write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    // One transaction in flight per partition, whoever calls.
    const run = this.chain.then(() => this.writer.write(batch));
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Disconnects this partition's producer (transactional mode); an open transaction is left to the next owner's fence. */
  async close(): Promise<void> {
    await this.chain;
    await this.transactional?.close();
    await this.local?.close();
  }

  /** Resolves once every queued local write has committed (tests, benchmarks). */
  async localWritesDone(): Promise<void> {
    await this.local?.done();
  }
}
