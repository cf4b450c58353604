import { type Logger, silentLogger } from '../../core/logger';
import type { OffsetCommitter } from '../offset-committer';
import type { OutputSender } from '../output-sender';
import type { PartitionPersistence, RecoveredKey, RestoreProgress, WriteBatch, WriteBatchResult } from '../../flow/ports';
import { StorePartitionPersistence } from '../store-partition-persistence';
import { isDeleteMarker, type PersistenceMode, persistsSnapshots, type TopicPartition } from '../../core/persistence-types';
import type { CassandraJournalStore } from './journal-store';
import type { CassandraKeyStore } from './key-store';
import { chunked, mapConcurrent } from './limiter';
import type { CassandraPersistenceMetrics } from './metrics';
import type { CassandraSnapshotStore } from './snapshot-store';

/** Where a recovery is, reported every `progressIntervalMs` and once at the end (`done`). */
export interface RecoveryProgress {
  readonly topic: string;
  readonly partition: number;
  /** Keys listed from the keys table so far (by-partition layout: rows scanned, delete markers included). */
  readonly keysListed: number;
  /** Keys read back with state (a snapshot, or a non-empty journal). */
  readonly keysRecovered: number;
  /** Listed keys without state (expired by TTL, or deleted between the key and snapshot writes). */
  readonly keysMissing: number;
  /** Journal events read (journal mode). */
  readonly journalEvents: number;
  readonly elapsedMs: number;
  readonly done: boolean;
}

export interface CassandraPartitionPersistenceOptions<S, V> {
  readonly partition: TopicPartition;
  readonly mode: PersistenceMode;
  readonly snapshots?: CassandraSnapshotStore<S>;
  readonly journal?: CassandraJournalStore<V>;
  /** The keys table: what recovery lists in the kafka-flow layout; none in the by-partition layout's 'snapshots' mode. */
  readonly keys?: CassandraKeyStore;
  /** Commits the input offset after the writes it covers (ConsumerOffsetCommitter: with the group generation). */
  readonly committer: OffsetCommitter;
  /** Produces dead letters before the writes that pass their records (at least once). */
  readonly outputs?: OutputSender;
  /** Default 1,000. */
  readonly maxWritesPerBatch?: number;
  /** Reads at once during recovery. Default 64 (reads also wait for the backend's read limiter). */
  readonly recoveryParallelism?: number;
  /** Snapshots per recovery read (`key IN (...)`); 1: one key per query. Default 100. Journals: one key per read. */
  readonly recoveryBatchSize?: number;
  readonly logger?: Logger;
  readonly onProgress?: (progress: RecoveryProgress) => void;
  /** Default 5 s. */
  readonly progressIntervalMs?: number;
  /** Prometheus metrics, labelled with this flow name. */
  readonly metrics?: { readonly registry: CassandraPersistenceMetrics; readonly flow: string };
}

/**
 * One input partition on Cassandra: writes through StorePartitionPersistence (journals, then
 * snapshots, then the keys table, then — only when every write was applied — the offset commit),
 * and an eager recovery that lists the partition's keys from the keys table and reads their
 * snapshots (or journals) with bounded parallelism — or, in the by-partition layout, scans the
 * partition's buckets — logging progress and a final report.
 */
export class CassandraPartitionPersistence<S, V> implements PartitionPersistence<S, V> {
  readonly maxWritesPerBatch: number;
  readonly partition: TopicPartition;
  /** The last recovery's final figures. */
  lastRecovery: RecoveryProgress | undefined;
  private readonly o: CassandraPartitionPersistenceOptions<S, V>;
  private readonly inner: StorePartitionPersistence<S, V>;
  private readonly log: Logger;
  private progress: RestoreProgress | undefined;

  constructor(options: CassandraPartitionPersistenceOptions<S, V>) {
    this.o = options;
    this.partition = options.partition;
    this.maxWritesPerBatch = options.maxWritesPerBatch ?? 1000;
    this.log = options.logger ?? silentLogger;
    this.inner = new StorePartitionPersistence<S, V>({
      partition: options.partition,
      mode: options.mode,
      snapshots: options.snapshots,
      journal: options.journal,
      // Under fencing 'timestamp' the snapshot store lists and unlists keys with its writes.
      keys: options.snapshots?.writesKeys ? undefined : options.keys,
      committer: options.committer,
      outputs: options.outputs,
      maxWritesPerBatch: this.maxWritesPerBatch,
    });
  }

  /** The snapshot store this partition writes with (its generation, its counters). */
  get snapshots(): CassandraSnapshotStore<S> | undefined {
    return this.o.snapshots;
  }

  async *recover(): AsyncIterable<RecoveredKey<S, V>> {
    const { mode, partition } = this.o;
    if (mode === 'none') return;
    const started = performance.now();
    const intervalMs = this.o.progressIntervalMs ?? 5000;
    let keysListed = 0;
    let keysRecovered = 0;
    let keysMissing = 0;
    let journalEvents = 0;
    let lastReport = started;
    let share: number | undefined;
    const onShare = (s: number) => {
      share = s;
    };
    this.progress = { read: 0, unit: 'keys' };
    const progress = (done: boolean): RecoveryProgress => ({
      topic: partition.topic,
      partition: partition.partition,
      keysListed,
      keysRecovered,
      keysMissing,
      journalEvents,
      elapsedMs: Math.round(performance.now() - started),
      done,
    });
    const report = (p: RecoveryProgress) => {
      this.o.onProgress?.(p);
      this.log.info({ ...p }, p.done ? 'cassandra: partition recovered' : 'cassandra: recovering partition');
    };
    const self = this;
    async function* listed(): AsyncGenerator<string> {
      const keys = self.o.keys;
      if (!keys) throw new TypeError('this partition has no keys table to list its keys from');
      for await (const key of keys.list(partition, onShare)) {
        keysListed++;
        yield key;
      }
    }
    this.log.info({ topic: partition.topic, partition: partition.partition, mode }, 'cassandra: recovering partition');
    const batches = this.scansBuckets() ? this.readBuckets(() => keysListed++, onShare) : this.readListed(listed());
    for await (const batch of batches) {
      for (const found of batch.found) {
        keysRecovered++;
        journalEvents += found.events?.length ?? 0;
        yield found;
      }
      keysMissing += batch.keys - batch.found.length;
      this.progress = { read: keysRecovered, unit: 'keys', fraction: share };
      const now = performance.now();
      if (now - lastReport >= intervalMs) {
        lastReport = now;
        report(progress(false));
      }
    }
    this.progress = { read: keysRecovered, unit: 'keys', fraction: 1 };
    const final = progress(true);
    this.lastRecovery = final;
    const m = this.o.metrics;
    if (m) {
      const labels = { flow: m.flow, topic: partition.topic, partition: String(partition.partition) };
      m.registry.recoveryDuration.observe(labels, final.elapsedMs / 1000);
      m.registry.recoveredKeys.inc(labels, final.keysRecovered);
    }
    report(final);
  }

  read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    return this.inner.read(key);
  }

  /** How far the running recovery is: keys read, and the share of the key segments (or buckets) listed. */
  restoreProgress(): RestoreProgress | undefined {
    return this.progress;
  }

  /**
   * The listed keys' state, batch by batch as reads complete: snapshots `recoveryBatchSize` keys
   * per query (a Cassandra partition per key, read together by the coordinator), journals one
   * key per query.
   */
  private readListed(keys: AsyncIterable<string>): AsyncIterable<{ keys: number; found: RecoveredKey<S, V>[] }> {
    const parallelism = this.o.recoveryParallelism ?? 64;
    const size = this.o.recoveryBatchSize ?? 100;
    const snapshots = this.o.snapshots;
    if (!persistsSnapshots(this.o.mode) || !snapshots || size === 1) {
      return mapConcurrent(keys, parallelism, async (key) => {
        const found = await this.inner.read(key);
        return { keys: 1, found: found ? [found] : [] };
      });
    }
    // Batches in flight: enough to keep the reads' slots busy (each batch takes one).
    const inFlight = Math.max(1, Math.ceil(parallelism / 4));
    return mapConcurrent(chunked(keys, size), inFlight, async (batch) => {
      const stored = await snapshots.readMany(this.partition, batch);
      return {
        keys: batch.length,
        found: stored.map(([key, s]): RecoveredKey<S, V> => (isDeleteMarker(s) ? { key, deleted: { offset: s.offset } } : { key, snapshot: s })),
      };
    });
  }

  /** Whether recovery scans the by-partition layout's buckets (no key listing). */
  private scansBuckets(): boolean {
    return persistsSnapshots(this.o.mode) && this.o.snapshots?.layout === 'by-partition';
  }

  /** By-partition: every row of the partition's buckets, in batches of one row (snapshots and delete markers alike). */
  private async *readBuckets(onRow: () => void, onShare: (share: number) => void): AsyncIterable<{ keys: number; found: RecoveredKey<S, V>[] }> {
    for await (const [key, s] of this.o.snapshots!.scan(this.partition, onShare)) {
      onRow();
      yield { keys: 1, found: [isDeleteMarker(s) ? { key, deleted: { offset: s.offset } } : { key, snapshot: s }] };
    }
  }

  write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    return this.inner.write(batch);
  }
}
