import { type Logger, silentLogger } from '../../core/logger';
import type { OffsetCommitter } from '../offset-committer';
import type { OutputSender } from '../output-sender';
import type { DueKeys, DueLook, KeyWrite, PartitionPersistence, RecoveredKey, RestoreProgress, WriteBatch, WriteBatchResult } from '../../flow/ports';
import type { CommittedPosition } from '../offset-committer';
import type { CassandraLocalState } from './local-state';
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
  /** With local state: keys taken from the local store (a trusted one: nothing read from Cassandra). */
  readonly fromLocal?: number;
  /** With local state: keys read from Cassandra. */
  readonly fromTopic?: number;
  /** With local state: 'delta' when the local store was trusted (Cassandra has no delta to read: nothing was), 'full' otherwise. */
  readonly restore?: 'delta' | 'full';
  /** Why the local store was not trusted. */
  readonly fullRestoreReason?: string;
}

/** Keys written to the local store at once during a full read from Cassandra. */
const LOCAL_RESTORE_CHUNK = 4096;

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
  /** The partition's local state store (docs/local-state.md#cassandra-persistence), written ahead of Cassandra. */
  readonly local?: CassandraLocalState<S, V>;
  /** The group's committed offset and its metadata, read after the assignment: whether the local store can be trusted. */
  readonly committed?: () => Promise<CommittedPosition | undefined>;
  /** With `local`: keys are read from the local store on demand (a bounded state cache). */
  readonly onDemand?: boolean;
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
  /** With local state read on demand: whether the store has state for a key not in memory. */
  readonly has?: (key: string) => boolean;
  /** With `has`: one key read now from the local store. */
  readonly readNow?: (key: string) => RecoveredKey<S, V> | undefined;
  /** With `has`: the keys out of memory with a timer due (the local store's due-time index). */
  readonly readDue?: (look: DueLook) => DueKeys<S, V>;

  constructor(options: CassandraPartitionPersistenceOptions<S, V>) {
    this.o = options;
    this.partition = options.partition;
    this.maxWritesPerBatch = options.maxWritesPerBatch ?? 1000;
    this.log = options.logger ?? silentLogger;
    const local = options.local;
    if (local && options.onDemand) {
      this.has = (key) => local.has(key);
      this.readNow = (key) => local.readNow(key);
      this.readDue = (look) => local.readDue(look);
    }
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
      local,
    });
  }

  /** The snapshot store this partition writes with (its generation, its counters). */
  get snapshots(): CassandraSnapshotStore<S> | undefined {
    return this.o.snapshots;
  }

  async *recover(): AsyncIterable<RecoveredKey<S, V>> {
    const { mode, partition, local } = this.o;
    if (mode === 'none') return;
    const started = performance.now();
    let fullRestoreReason: string | undefined;
    if (local) {
      const outcome = await local.load(await this.o.committed?.());
      if (outcome.kind === 'loaded') {
        const final: RecoveryProgress = {
          topic: partition.topic,
          partition: partition.partition,
          keysListed: 0,
          keysRecovered: outcome.keys,
          keysMissing: 0,
          journalEvents: 0,
          elapsedMs: Math.round(performance.now() - started),
          done: true,
          fromLocal: outcome.keys,
          fromTopic: 0,
          restore: 'delta',
        };
        await this.landAhead(outcome.unlanded);
        this.lastRecovery = final;
        this.progress = { read: outcome.keys, unit: 'keys', fraction: 1 };
        this.log.info({ ...final, unlanded: outcome.unlanded.length }, `restored ${partition.topic}-${partition.partition}: ${outcome.keys} keys from local state, 0 from Cassandra`);
        for (const [key, stored] of outcome.entries ?? []) yield local.recovered(key, stored);
        return;
      }
      fullRestoreReason = outcome.reason;
    }
    // A full read with local state: every key also goes to the store (in chunks); keys read on demand are not yielded.
    let chunk: RecoveredKey<S, V>[] = [];
    const yieldKeys = !(local && this.o.onDemand);
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
        if (local) {
          chunk.push(found);
          if (chunk.length >= LOCAL_RESTORE_CHUNK) {
            await local.restored(chunk);
            chunk = [];
          }
        }
        if (yieldKeys) yield found;
      }
      keysMissing += batch.keys - batch.found.length;
      this.progress = { read: keysRecovered, unit: 'keys', fraction: share };
      const now = performance.now();
      if (now - lastReport >= intervalMs) {
        lastReport = now;
        report(progress(false));
      }
    }
    if (local) await local.restored(chunk);
    this.progress = { read: keysRecovered, unit: 'keys', fraction: 1 };
    const final: RecoveryProgress = local
      ? { ...progress(true), fromLocal: 0, fromTopic: keysRecovered, restore: 'full', fullRestoreReason }
      : progress(true);
    this.lastRecovery = final;
    const m = this.o.metrics;
    if (m) {
      const labels = { flow: m.flow, topic: partition.topic, partition: String(partition.partition) };
      m.registry.recoveryDuration.observe(labels, final.elapsedMs / 1000);
      m.registry.recoveredKeys.inc(labels, final.keysRecovered);
    }
    report(final);
  }

  /**
   * Writes to Cassandra the keys the store holds ahead of it (a crash between the local write and
   * Cassandra's), before anything folds: the replay skips the records their state covers, so
   * nothing else would write them before the next commit passes those records.
   */
  private async landAhead(keys: readonly string[]): Promise<void> {
    const local = this.o.local!;
    const writes: KeyWrite<S, V>[] = [];
    for (const key of keys) {
      const found = local.readNow(key);
      if (found?.snapshot) writes.push({ key, snapshot: found.snapshot, addKey: true });
      else if (found?.deleted) writes.push({ key, delete: found.deleted, addKey: true });
    }
    for (let i = 0; i < writes.length; i += this.maxWritesPerBatch) {
      const chunk = writes.slice(i, i + this.maxWritesPerBatch);
      const { statuses } = await this.inner.write({ writes: chunk });
      const refused = chunk.filter((_, j) => statuses[j] !== 'applied').map((w) => w.key);
      // Refused: Cassandra holds a newer owner's state of these keys; this owner's commits are fenced.
      if (refused.length > 0) this.log.warn({ topic: this.partition.topic, partition: this.partition.partition, keys: refused.slice(0, 10), refused: refused.length }, 'local state ahead of Cassandra: writes refused (a newer owner wrote these keys)');
    }
  }

  read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    if (this.readNow) return Promise.resolve(this.readNow(key));
    return this.inner.read(key);
  }

  /** How far the local store's commits go, if it has one that was loaded or written. */
  get localCoverage(): string | undefined {
    return this.o.local?.coverage;
  }

  /** Closes the partition's local store, if any (the partition was revoked, or recovered again). */
  async close(): Promise<void> {
    await this.o.local?.close();
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
