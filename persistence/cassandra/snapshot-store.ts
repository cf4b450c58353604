import { showKey } from '../../core/redact';
import { types } from 'cassandra-driver';
import type { Codec } from '../../core/codec/codec';
import { CorruptSnapshotError, decodeSnapshot } from '../../core/codec/errors';
import { timersFromMetadata, timersToJson } from '../../core/key-timers-json';
import { type Logger, silentLogger } from '../../core/logger';
import { offsetText } from '../../flow/offsets';
import type { ListedAgain, PurgedKey, SnapshotStore, SnapshotWrite } from '../snapshot-store';
import type { KeyTimer, StoredKey, TopicPartition, WriteStatus } from '../../core/persistence-types';
import { CassandraFencingMismatchError, CassandraPersistenceError, CassandraWriteRefusedError, type UnsettledReason } from './errors';
import { MAX_ROUNDS, type NextStep, nextStep, type StoredVersion, type WriteAttempt } from './fencing';
import { allBuckets, keyBucket } from './buckets';
import type { CassandraKeyStore, KeyLister } from './key-store';
import { chunked, mapConcurrent, mergeConcurrent } from './limiter';
import type { CassandraPersistenceMetrics } from './metrics';
import type { ConsistencyOverride, Fencing, SnapshotLayout } from './options';
import { type CassandraSession, hasColumn, long, longOf, toNumberOrNull } from './session';
import { FenceSequences, fenceTimestamp, isFenceTimestamp } from './write-timestamp';

export interface CassandraSnapshotStoreOptions<S> {
  readonly session: CassandraSession;
  readonly keyspace: string;
  readonly table: string;
  readonly applicationId: string;
  readonly groupId: string;
  /** The bytes stored in `value`: the state codec, compression included (withCompression). */
  readonly codec: Codec<S>;
  readonly consistency: Required<ConsistencyOverride>;
  /** TTL of written snapshots in seconds; 0: none. */
  readonly ttlSeconds: number;
  readonly fencing: Fencing;
  /**
   * 'lwt': how long a purged key's fence row lives, in seconds; 0: a purge removes the row. Delete
   * markers never expire (the engine purges them once the committed offset has passed them).
   */
  readonly fenceRowTtlSeconds: number;
  /**
   * The writer's owner generation: 'lwt' compares it (plus fenceEpoch × 2³²; without one, only
   * offsets are compared); 'timestamp' writes it into every write timestamp (and needs one).
   */
  readonly generation?: number;
  /** 'timestamp': the consumer group's fenceEpoch (0…15), above the generation in the order. */
  readonly fenceEpoch?: number;
  /**
   * 'timestamp', kafka-flow layout: the keys table, written with the snapshot's timestamp along
   * every write (a put or marker lists its key, a purge unlists it) so that a stale owner's
   * purge cannot unlist a key a newer owner wrote. Under 'lwt' and 'none' the engine writes the
   * keys table after the batch instead.
   */
  readonly keyIndex?: CassandraKeyStore;
  /** 'timestamp': the batch sequences, shared by every view (withGeneration) of the store. */
  readonly sequences?: FenceSequences;
  /**
   * What a refusal without a newer owner (by offset, marker or contention) makes of the batch:
   * 'error' (default) throws CassandraWriteRefusedError, a failure the partition recovers from;
   * 'not-applied' reports the write as not applied (the layout migration: the target kept newer).
   */
  readonly unsettled?: 'error' | 'not-applied';
  /** Lists a partition's keys, for readAll in the kafka-flow layout (recovery without a key store of its own). */
  readonly keys?: KeyLister;
  /** Default 'kafka-flow': a Cassandra partition per key. 'by-partition': a Kafka partition's keys clustered in `buckets` partitions. */
  readonly layout?: SnapshotLayout;
  /** The by-partition layout's bucket count (fixed for the table). */
  readonly buckets?: number;
  /** By-partition: buckets scanned at once by readAll. Default 16. */
  readonly scanParallelism?: number;
  /** By-partition: rows per page of a bucket scan. Default 1,000. */
  readonly scanPageSize?: number;
  readonly logger?: Logger;
  /** Shared counters (views made with withGeneration share their parent's). */
  readonly stats?: SnapshotStoreStats;
  /** Prometheus metrics, labelled with this flow name. */
  readonly metrics?: { readonly registry: CassandraPersistenceMetrics; readonly flow: string };
}

/** Counters since the store was created. */
export interface SnapshotStoreStats {
  /** Puts and deletes applied. */
  applied: number;
  /** Writes the fence refused because a newer generation wrote ('not-applied'). */
  refused: number;
  /** Writes refused without a newer owner (CassandraWriteRefusedError): by offset, marker or contention. */
  unsettled: number;
  /** Statements sent for writes (an 'lwt' write takes one, sometimes two or more). */
  writeStatements: number;
}

/** A refusal, as logged. */
export interface Refusal {
  readonly key: string;
  readonly kind: 'put' | 'delete' | 'purge';
  readonly offset: number;
  /**
   * What the stored row had: a newer generation (a fence); a newer offset of this generation (or,
   * without generations, of anyone); a marker at this put's offset; 'contended': it kept changing
   * under us. Only 'generation' is a fence.
   */
  readonly by: 'generation' | UnsettledReason;
  readonly reason: string;
}

/** Keys per `key IN (...)` read of readAll, and such reads at once. */
const READ_BATCH = 100;
const READ_BATCHES_IN_FLIGHT = 8;
/** By-partition: buckets scanned at once, and rows per page of a bucket's scan. */
const SCAN_PARALLELISM = 16;
const SCAN_PAGE_SIZE = 1000;

/**
 * Snapshots in kafka-flow's snapshots table (one Cassandra partition per key), or — layout
 * 'by-partition' — in a table whose Cassandra partitions are buckets of a Kafka partition, the key
 * the clustering column (every statement then also names the key's bucket). With fencing
 * 'lwt' every put and delete is a lightweight transaction ordered by (generation, offset) — see
 * fencing.ts and docs/cassandra.md; with 'none' they are kafka-flow's plain last-write-wins
 * UPDATE and DELETE. A write refused because a newer generation wrote is `not-applied` (the engine
 * raises SnapshotWriteConflictError and stops the partition); a failed statement fails the batch
 * with CassandraPersistenceError, and a refusal without a newer owner with
 * CassandraWriteRefusedError (see writeBatch). Delete markers have no TTL; under 'lwt' a purge
 * leaves a fence row that expires after fenceRowTtl.
 */
export class CassandraSnapshotStore<S> implements SnapshotStore<S> {
  readonly stats: SnapshotStoreStats;
  readonly generation: number | undefined;
  readonly table: string;
  readonly layout: SnapshotLayout;
  /** The by-partition layout's bucket count; 0 in the kafka-flow layout. */
  readonly buckets: number;
  private readonly o: CassandraSnapshotStoreOptions<S>;
  private readonly log: Logger;
  /** Keys known to have a row (live or fence row), per partition: a put to them starts with UPDATE … IF, not INSERT. */
  private readonly rows = new Map<string, Set<string>>();
  private readonly q: ReturnType<typeof statements>;
  private readonly sequences: FenceSequences;

  constructor(options: CassandraSnapshotStoreOptions<S>) {
    this.o = options;
    this.log = options.logger ?? silentLogger;
    this.stats = options.stats ?? { applied: 0, refused: 0, unsettled: 0, writeStatements: 0 };
    this.generation = options.generation;
    this.table = `${options.keyspace}.${options.table}`;
    this.layout = options.layout ?? 'kafka-flow';
    this.buckets = options.buckets ?? 0;
    if (this.layout === 'by-partition' && !(Number.isInteger(this.buckets) && this.buckets >= 1)) {
      throw new RangeError(`the by-partition layout needs a whole number of buckets ≥ 1; got ${this.buckets}`);
    }
    this.q = statements(this.table, this.layout);
    this.sequences = options.sequences ?? new FenceSequences();
  }

  /** The same store writing as `generation` (one per assignment of a partition), sharing statements and counters. */
  withGeneration(generation: number | undefined): CassandraSnapshotStore<S> {
    return new CassandraSnapshotStore<S>({ ...this.o, generation, stats: this.stats, sequences: this.sequences });
  }

  get fencing(): Fencing {
    return this.o.fencing;
  }

  /** Whether the store writes the keys table itself ('timestamp' with a key index). */
  get writesKeys(): boolean {
    return this.o.fencing === 'timestamp' && this.o.keyIndex !== undefined;
  }

  async read(partition: TopicPartition, key: string): Promise<StoredKey<S> | undefined> {
    let rs: types.ResultSet;
    try {
      rs = await this.o.session.read(this.q.select, this.pk(partition, key), this.o.consistency.read);
    } catch (err) {
      throw this.error('snapshot read', partition, [key], err, false);
    }
    const row = rs.first();
    return row ? this.stored(partition, key, row) : undefined;
  }

  /**
   * Several keys' snapshots (or delete markers) in one query (`key IN (...)`), for recovery: the
   * keys found, in no particular order; keys without a row are left out.
   */
  async readMany(partition: TopicPartition, keys: readonly string[]): Promise<Array<readonly [key: string, stored: StoredKey<S>]>> {
    if (keys.length === 0) return [];
    if (keys.length === 1) {
      const stored = await this.read(partition, keys[0]!);
      return stored ? [[keys[0]!, stored]] : [];
    }
    const { applicationId, groupId } = this.o;
    const found: Array<readonly [string, StoredKey<S>]> = [];
    // By-partition: one `key IN (...)` per bucket the keys fall in.
    const groups = this.layout === 'by-partition' ? [...groupBy(keys, (k) => this.bucketOf(k))] : [[undefined, keys] as const];
    try {
      for (const [bucket, group] of groups) {
        const params = [applicationId, groupId, partition.topic, partition.partition, ...(bucket === undefined ? [] : [bucket]), group];
        for await (const row of this.o.session.rows(this.q.selectMany, params, this.o.consistency.read)) {
          const key = row.get('key') as string;
          const stored = this.stored(partition, key, row);
          if (stored) found.push([key, stored]);
        }
      }
    } catch (err) {
      throw this.error('snapshot read', partition, keys, err, false);
    }
    return found;
  }

  /** The key's bucket (by-partition layout). */
  bucketOf(key: string): number {
    return keyBucket(key, this.buckets);
  }

  /**
   * By-partition: every row of the partition's buckets — snapshots and delete markers — scanned
   * page by page, `scanParallelism` buckets at once (each page a read slot of the session), yielded
   * as pages arrive. A bucket's next page is fetched once its previous one is consumed.
   */
  async *scan(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<readonly [key: string, stored: StoredKey<S>]> {
    if (this.layout !== 'by-partition') throw new TypeError('CassandraSnapshotStore.scan reads the by-partition layout only');
    const { applicationId, groupId } = this.o;
    const pageSize = this.o.scanPageSize ?? SCAN_PAGE_SIZE;
    const self = this;
    let scanned = 0;
    async function* bucketPages(bucket: number): AsyncGenerator<types.Row[]> {
      const params = [applicationId, groupId, partition.topic, partition.partition, bucket];
      let pageState: string | undefined;
      do {
        let rs: types.ResultSet;
        try {
          rs = await self.o.session.read(self.q.scanBucket, params, self.o.consistency.read, pageSize, pageState);
        } catch (err) {
          throw self.error(`snapshot scan (bucket ${bucket})`, partition, [], err, false);
        }
        yield rs.rows;
        pageState = rs.pageState ?? undefined;
      } while (pageState);
      onShare?.(++scanned / self.buckets);
    }
    const pages = mergeConcurrent(allBuckets(this.buckets).map(bucketPages), this.o.scanParallelism ?? SCAN_PARALLELISM);
    for await (const rows of pages) {
      for (const row of rows) {
        const key = row.get('key') as string;
        const stored = this.stored(partition, key, row);
        if (stored) yield [key, stored];
      }
    }
  }

  /**
   * A snapshots row as what it stores: a snapshot, or a deleted key's marker; undefined for a row
   * whose cells have all expired (a fence row's TTL over a row first INSERTed leaves its primary
   * key behind), which holds nothing.
   */
  private stored(partition: TopicPartition, key: string, row: types.Row): StoredKey<S> | undefined {
    this.remember(partition, key, true);
    const value = row.get('value') as Buffer | null;
    const stored = toNumberOrNull(row.get('offset'));
    if (stored === null) return undefined;
    if (this.o.fencing !== 'timestamp' && isFenceTimestamp(row.get('written') as types.Long | null)) {
      throw new CassandraFencingMismatchError({ table: this.table, topic: partition.topic, partition: partition.partition }, this.o.fencing);
    }
    const offset = stored;
    // A deleted key's row keeps its offset without a value: its delete marker (and, under 'lwt',
    // the fence that refuses a stale owner's older put).
    if (value === null || value === undefined) return { deleted: true, offset };
    const where = { topic: partition.topic, partition: partition.partition, key, offset: offsetText(offset) };
    const state = decodeSnapshot(this.o.codec, value, where);
    const timers = decodeTimers(row, where);
    return timers ? { state, offset, timers } : { state, offset };
  }

  async *readAll(partition: TopicPartition): AsyncIterable<readonly [key: string, stored: StoredKey<S>]> {
    if (this.layout === 'by-partition') {
      yield* this.scan(partition);
      return;
    }
    const keys = this.o.keys;
    if (!keys) {
      throw new TypeError(
        'CassandraSnapshotStore.readAll needs a key lister (the keys table): the snapshots table cannot list a partition without a full scan',
      );
    }
    const batches = mapConcurrent(chunked(keys.list(partition), READ_BATCH), READ_BATCHES_IN_FLIGHT, (batch) => this.readMany(partition, batch));
    for await (const found of batches) yield* found;
  }

  /**
   * One status per write. A refusal because a newer generation wrote is `not-applied` (a fence;
   * it wins over anything else in the batch: the partition is no longer ours). Otherwise a failed
   * statement fails the batch with CassandraPersistenceError, and a refusal without a newer owner
   * (by offset, marker or contention) with CassandraWriteRefusedError: failures the partition
   * recovers from on its owner.
   */
  async writeBatch(partition: TopicPartition, writes: readonly SnapshotWrite<S>[]): Promise<WriteStatus[]> {
    const refusals: Refusal[] = [];
    const statementsBefore = this.stats.writeStatements;
    const at = this.o.fencing === 'timestamp' ? this.batchTimestamp(partition) : undefined;
    const settled = await Promise.allSettled(
      writes.map((w) => (at === undefined ? this.writeOne(partition, w, refusals) : this.writeAt(partition, w, at))),
    );
    const failedKeys: string[] = [];
    let firstError: unknown;
    const statuses = settled.map((s, i): WriteStatus => {
      if (s.status === 'fulfilled') return s.value;
      const key = writes[i]!.key;
      failedKeys.push(key);
      this.forget(partition, key); // its row is unknown now
      firstError ??= s.reason;
      return 'not-applied';
    });
    const fenced = refusals.filter((r) => r.by === 'generation');
    const unsettled = refusals.filter((r): r is Refusal & { by: UnsettledReason } => r.by !== 'generation');
    const examples = (rs: readonly Refusal[]) => rs.slice(0, 5).map((r) => ({ ...r, key: showKey(r.key) }));
    const where = { topic: partition.topic, partition: partition.partition, generation: this.generation };
    if (fenced.length > 0) {
      this.stats.refused += fenced.length;
      this.log.warn({ ...where, refused: fenced.length, examples: examples(fenced) }, 'cassandra: the snapshot fence refused writes: another owner wrote newer state');
    }
    if (unsettled.length > 0) {
      this.stats.unsettled += unsettled.length;
      this.log.warn(
        { ...where, refused: unsettled.length, examples: examples(unsettled) },
        'cassandra: fenced writes refused without a newer owner (this generation\'s own rows disagree, or contention): a failure, not a fence',
      );
    }
    const m = this.o.metrics;
    if (m) {
      const labels = { flow: m.flow, topic: partition.topic, partition: String(partition.partition) };
      const applied = writes.length - refusals.length - failedKeys.length;
      if (applied > 0) m.registry.snapshotWrites.inc({ ...labels, outcome: 'applied' }, applied);
      if (fenced.length > 0) m.registry.snapshotWrites.inc({ ...labels, outcome: 'refused' }, fenced.length);
      if (failedKeys.length + unsettled.length > 0) m.registry.snapshotWrites.inc({ ...labels, outcome: 'failed' }, failedKeys.length + unsettled.length);
      for (const r of refusals) m.registry.fenceRefusals.inc({ ...labels, by: r.by });
      m.registry.writeStatements.inc(labels, this.stats.writeStatements - statementsBefore);
    }
    if (fenced.length > 0) return statuses;
    if (failedKeys.length > 0) throw this.error('snapshot write', partition, failedKeys, firstError, true);
    if (unsettled.length > 0 && this.o.unsettled !== 'not-applied') throw new CassandraWriteRefusedError({ table: this.table, topic: partition.topic, partition: partition.partition }, unsettled);
    return statuses;
  }

  /** 'timestamp': this batch's write timestamp, the owner's next in order. */
  private batchTimestamp(partition: TopicPartition): bigint {
    const generation = this.generation;
    if (generation === undefined) throw new TypeError("fencing 'timestamp' writes need the owner's consumer generation");
    const sequence = this.sequences.take(`${partition.topic}\u0000${partition.partition}`, generation);
    return fenceTimestamp(this.o.fenceEpoch ?? 0, generation, sequence);
  }

  /**
   * 'timestamp': one plain write at the batch's fence timestamp (and its keys-table row at the
   * same timestamp). Always applied as far as this writer can tell: a newer owner's cells shadow it.
   */
  private async writeAt(partition: TopicPartition, w: SnapshotWrite<S>, at: bigint): Promise<WriteStatus> {
    const pk = this.pk(partition, w.key);
    const ts = longOf(at);
    const gen = long(this.generation!);
    const index = this.o.keyIndex;
    const statements: Array<Promise<unknown>> = [];
    if (w.kind === 'put') {
      const value = this.o.codec.encode(w.snapshot.state);
      statements.push(this.exec(this.q.putAt, [this.o.ttlSeconds, ts, long(w.snapshot.offset), new Date(), timersToJson(w.snapshot.timers), value, gen, ...pk]));
      if (index) statements.push(index.listAt(partition, w.key, ts, { pinned: false, created: w.newKey === true }));
    } else if (w.kind === 'delete') {
      // A marker never expires: it stands until the committed offset passes it (then purged).
      statements.push(this.exec(this.q.markerAt, [ts, long(w.offset), new Date(), gen, ...pk]));
      if (index) statements.push(index.listAt(partition, w.key, ts, { pinned: true, created: w.newKey === true }));
    } else {
      statements.push(this.exec(this.q.purgeAt, [ts, ...pk]));
      if (index) statements.push(index.unlistAt(partition, w.key, ts));
    }
    await Promise.all(statements);
    this.stats.applied++;
    return 'applied';
  }

  private async writeOne(partition: TopicPartition, w: SnapshotWrite<S>, refusals: Refusal[]): Promise<WriteStatus> {
    const offset = w.kind === 'put' ? w.snapshot.offset : w.offset;
    const value = w.kind === 'put' ? this.o.codec.encode(w.snapshot.state) : undefined;
    // The key's pending timers ride in kafka-flow's `metadata` column (it writes '' there).
    const metadata = w.kind === 'put' ? timersToJson(w.snapshot.timers) : '';
    const pk = this.pk(partition, w.key);
    if (this.o.fencing === 'none') {
      if (w.kind === 'put') {
        await this.exec(this.q.plainPut, [this.o.ttlSeconds, long(offset), new Date(), metadata, value, ...pk]);
      } else if (w.kind === 'delete') {
        // A marker never expires: it stands until the committed offset passes it (then purged).
        await this.exec(this.q.plainMarker, [0, long(offset), new Date(), ...pk]);
      } else {
        await this.exec(this.q.plainDelete, pk);
      }
      this.stats.applied++;
      return 'applied';
    }
    // Under 'lwt' with fenceRowTtl, a purge leaves the row as a fence against a stale owner's
    // older put — a marker row that expires after fenceRowTtl (harmless: the committed offset has
    // passed it, so no replay needs it); the key leaves the keys table, so recovery no longer
    // reads it. A delete marker proper has no TTL.
    const fenceRow = w.kind === 'purge' && this.o.fenceRowTtlSeconds > 0;
    const kind = fenceRow ? 'delete' : w.kind;
    const ttl = kind === 'put' ? this.o.ttlSeconds : fenceRow ? this.o.fenceRowTtlSeconds : 0;
    const attempt: WriteAttempt = { kind, generation: this.generation, offset };
    let step: NextStep =
      w.kind === 'put' && !this.known(partition, w.key) ? { step: 'insert' } : { step: 'conditional' };
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      if (step.step === 'done') break;
      if (step.step === 'refuse') {
        refusals.push({ key: w.key, kind, offset, by: step.by, reason: step.reason });
        this.remember(partition, w.key, true);
        return 'not-applied';
      }
      if (step.step === 'read') {
        step = nextStep(await this.readVersion(partition, w.key), attempt);
        continue;
      }
      const statement = this.lwt(step, kind, offset, value, metadata, ttl, pk);
      const rs = await this.inPaxosLane(partition, w.key, () => this.exec(...statement));
      if (rs.wasApplied()) {
        step = { step: 'done' };
        break;
      }
      step = nextStep(storedVersion(rs), attempt);
    }
    if (step.step !== 'done') {
      refusals.push({ key: w.key, kind, offset, by: 'contended', reason: `still contended after ${MAX_ROUNDS} statements` });
      return 'not-applied';
    }
    // A put or a delete marker leaves a row; a purge removes it (unless it left a fence row).
    this.remember(partition, w.key, kind !== 'purge');
    this.stats.applied++;
    return 'applied';
  }

  /**
   * Fencing 'lwt': the keys-table removal of a purge is a plain write that can land after another
   * engine of the partition wrote the key again and listed it (the purge's condition let it
   * through before that write). Read each purged row linearizably once the removal has landed: a
   * row that is not this purge's own fence row was written since, so its key is listed again. A
   * writer that stores the key after this read lists it after the removal landed.
   */
  async writtenSincePurge(partition: TopicPartition, purges: readonly PurgedKey[]): Promise<ListedAgain[]> {
    if (this.o.fencing !== 'lwt') return [];
    const versions = await Promise.all(purges.map(async (p) => [p, await this.readVersion(partition, p.key)] as const));
    const again: ListedAgain[] = [];
    for (const [p, v] of versions) {
      if (v === undefined || v.offset === null) continue;
      const ownFenceRow = v.marker && v.offset === p.offset && v.generation === (this.generation ?? null);
      if (ownFenceRow) continue;
      this.remember(partition, p.key, true);
      again.push({ key: p.key, marker: v.marker === true });
    }
    return again;
  }

  /** The row's version, read linearizably (serial consistency: it sees every accepted LWT). */
  private async readVersion(partition: TopicPartition, key: string): Promise<StoredVersion | undefined> {
    let rs: types.ResultSet;
    try {
      rs = await this.inPaxosLane(partition, key, () => this.o.session.readSerial(this.q.selectVersion, this.pk(partition, key)));
    } catch (err) {
      throw this.error('snapshot version read', partition, [key], err, true);
    }
    const row = rs.first();
    if (!row) return undefined;
    return {
      generation: toNumberOrNull(row.get('generation')),
      offset: toNumberOrNull(row.get('offset')),
      marker: (row.get('value') as Buffer | null) === null,
    };
  }

  /** The statement and parameters of one step of a fenced write. */
  private lwt(
    step: Exclude<NextStep, { step: 'done' } | { step: 'refuse' } | { step: 'read' }>,
    kind: SnapshotWrite<S>['kind'],
    offset: number,
    value: Buffer | undefined,
    metadata: string,
    ttl: number,
    pk: unknown[],
  ): [string, unknown[]] {
    const g = this.generation;
    const gen = g === undefined ? undefined : long(g);
    const now = new Date();
    const q = this.q;
    if (kind === 'put') {
      const set = [ttl, long(offset), now, metadata, value];
      switch (step.step) {
        case 'insert':
          return [q.insert, [...pk, long(offset), now, metadata, value, gen ?? types.unset, ttl]];
        case 'conditional':
          return gen === undefined
            ? [q.putIfOffsetNewer, [...set, ...pk, long(offset)]]
            : [q.putIfNewer, [...set, gen, ...pk, gen, long(offset)]];
        case 'cas':
          return [q.putIfSame, [...set, gen ?? types.unset, ...pk, expectedGeneration(step.expected), expectedOffset(step.expected)]];
      }
    }
    if (kind === 'delete') {
      // The delete marker (or a purge's fence row): the row keeps the deleting offset (and
      // generation) without a value.
      const set = [ttl, long(offset), now];
      switch (step.step) {
        case 'insert':
          return [q.insert, [...pk, long(offset), now, null, null, gen ?? types.unset, ttl]];
        case 'conditional':
          return gen === undefined
            ? [q.deleteIfOffsetNotNewer, [...set, ...pk, long(offset)]]
            : [q.deleteIfNotNewer, [...set, gen, ...pk, gen, long(offset)]];
        case 'cas':
          return [q.deleteIfSame, [...set, gen ?? types.unset, ...pk, expectedGeneration(step.expected), expectedOffset(step.expected)]];
      }
    }
    // A purge (fenceRowTtl 0): the row goes, unless a newer owner wrote since.
    switch (step.step) {
      case 'insert':
      case 'conditional':
        return gen === undefined ? [q.purgeIfOffsetNotNewer, [...pk, long(offset)]] : [q.purgeIfNotNewer, [...pk, gen, long(offset)]];
      case 'cas':
        return [q.purgeIfSame, [...pk, expectedGeneration(step.expected), expectedOffset(step.expected)]];
    }
  }

  /**
   * By-partition: a bucket is one Cassandra partition shared by many keys, so the key's LWTs and
   * serial reads wait for the process's others on its bucket (CassandraSession.paxosLane). The
   * kafka-flow layout's partition is the key itself: nothing to order.
   */
  private inPaxosLane<T>(partition: TopicPartition, key: string, task: () => Promise<T>): Promise<T> {
    if (this.layout !== 'by-partition') return task();
    const lane = `${this.table}\u0000${this.o.applicationId}\u0000${this.o.groupId}\u0000${partition.topic}\u0000${partition.partition}\u0000${this.bucketOf(key)}`;
    return this.o.session.paxosLane(lane, task);
  }

  private async exec(query: string, params: unknown[]): Promise<types.ResultSet> {
    this.stats.writeStatements++;
    return this.o.session.write(query, params, this.o.consistency.write);
  }

  /** The primary key's values, in the order of the statements' WHERE clause and INSERT columns. */
  private pk(partition: TopicPartition, key: string): unknown[] {
    if (this.layout === 'by-partition') {
      return [this.o.applicationId, this.o.groupId, partition.topic, partition.partition, this.bucketOf(key), key];
    }
    return [this.o.applicationId, this.o.groupId, partition.topic, partition.partition, key];
  }

  private partitionRows(partition: TopicPartition): Set<string> {
    const id = `${partition.topic}\u0000${partition.partition}`;
    let set = this.rows.get(id);
    if (!set) {
      set = new Set();
      this.rows.set(id, set);
    }
    return set;
  }

  private known(partition: TopicPartition, key: string): boolean {
    return this.partitionRows(partition).has(key);
  }

  private remember(partition: TopicPartition, key: string, exists: boolean): void {
    if (this.o.fencing !== 'lwt') return;
    if (exists) this.partitionRows(partition).add(key);
    else this.partitionRows(partition).delete(key);
  }

  private forget(partition: TopicPartition, key: string): void {
    this.partitionRows(partition).delete(key);
  }

  private error(operation: string, partition: TopicPartition, keys: readonly string[], cause: unknown, writing: boolean) {
    return new CassandraPersistenceError(
      {
        operation,
        table: this.table,
        topic: partition.topic,
        partition: partition.partition,
        keys,
        contactPoints: this.o.session.contactPoints,
        writing,
      },
      cause,
    );
  }
}

function expectedOffset(v: StoredVersion): types.Long | null {
  return v.offset === null ? null : long(v.offset);
}

function expectedGeneration(v: StoredVersion): types.Long | null {
  return v.generation === null ? null : long(v.generation);
}

/** The stored version a refused conditional statement answered with; undefined when there is no row. */
function storedVersion(rs: types.ResultSet): StoredVersion | undefined {
  if (!hasColumn(rs, 'offset')) return undefined;
  const row = rs.first();
  if (!row) return undefined;
  const offset = toNumberOrNull(row.get('offset'));
  const generation = hasColumn(rs, 'generation') ? toNumberOrNull(row.get('generation')) : null;
  // INSERT … IF NOT EXISTS answers with the whole row; a conditional UPDATE/DELETE only with the
  // columns of its condition, so whether the row is a marker is then unknown.
  const marker = hasColumn(rs, 'value') ? (row.get('value') as Buffer | null) === null : undefined;
  return { generation, offset, marker };
}

function groupBy<T, K>(items: readonly T[], keyOf: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    const group = out.get(k);
    if (group) group.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** The CQL of the snapshots table, by what it does; the by-partition layout also names the key's bucket. */
function statements(t: string, layout: SnapshotLayout) {
  const bucket = layout === 'by-partition' ? 'bucket = ? AND ' : '';
  const bucketColumn = layout === 'by-partition' ? 'bucket, ' : '';
  const partitionWhere = `application_id = ? AND group_id = ? AND topic = ? AND partition = ? AND ${bucket}`;
  const where = `${partitionWhere}key = ?`;
  const setPut = 'offset = ?, created = ?, metadata = ?, value = ?';
  const setMarker = 'offset = ?, created = ?, metadata = null, value = null';
  return {
    // `written`: the offset cell's write timestamp (a fence timestamp under 'timestamp').
    select: `SELECT offset, value, metadata, WRITETIME(offset) AS written FROM ${t} WHERE ${where}`,
    selectVersion: `SELECT offset, generation, value FROM ${t} WHERE ${where}`,
    selectMany: `SELECT key, offset, value, metadata, WRITETIME(offset) AS written FROM ${t} WHERE ${partitionWhere}key IN ?`,
    // By-partition: a bucket's rows, in key order.
    scanBucket: `SELECT key, offset, value, metadata, WRITETIME(offset) AS written FROM ${t} WHERE application_id = ? AND group_id = ? AND topic = ? AND partition = ? AND bucket = ?`,
    // fencing 'none': kafka-flow's statements, plus the delete marker.
    plainPut: `UPDATE ${t} USING TTL ? SET ${setPut} WHERE ${where}`,
    plainMarker: `UPDATE ${t} USING TTL ? SET ${setMarker} WHERE ${where}`,
    plainDelete: `DELETE FROM ${t} WHERE ${where}`,
    // fencing 'timestamp': plain writes at the owner's fence timestamp (write-timestamp.ts).
    putAt: `UPDATE ${t} USING TTL ? AND TIMESTAMP ? SET ${setPut}, generation = ? WHERE ${where}`,
    markerAt: `UPDATE ${t} USING TTL 0 AND TIMESTAMP ? SET ${setMarker}, generation = ? WHERE ${where}`,
    purgeAt: `DELETE FROM ${t} USING TIMESTAMP ? WHERE ${where}`,
    // fencing 'lwt'.
    insert:
      `INSERT INTO ${t} (application_id, group_id, topic, partition, ${bucketColumn}key, offset, created, metadata, value, generation) ` +
      `VALUES (?, ?, ?, ?, ${layout === 'by-partition' ? '?, ' : ''}?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?`,
    putIfNewer: `UPDATE ${t} USING TTL ? SET ${setPut}, generation = ? WHERE ${where} IF generation <= ? AND offset < ?`,
    putIfOffsetNewer: `UPDATE ${t} USING TTL ? SET ${setPut} WHERE ${where} IF offset < ?`,
    putIfSame: `UPDATE ${t} USING TTL ? SET ${setPut}, generation = ? WHERE ${where} IF generation = ? AND offset = ?`,
    // Delete markers (no TTL) and a purge's fence rows (TTL fenceRowTtl).
    deleteIfNotNewer: `UPDATE ${t} USING TTL ? SET ${setMarker}, generation = ? WHERE ${where} IF generation <= ? AND offset <= ?`,
    deleteIfOffsetNotNewer: `UPDATE ${t} USING TTL ? SET ${setMarker} WHERE ${where} IF offset <= ?`,
    deleteIfSame: `UPDATE ${t} USING TTL ? SET ${setMarker}, generation = ? WHERE ${where} IF generation = ? AND offset = ?`,
    // Purges of a marker (fenceRowTtl 0).
    purgeIfNotNewer: `DELETE FROM ${t} WHERE ${where} IF generation <= ? AND offset <= ?`,
    purgeIfOffsetNotNewer: `DELETE FROM ${t} WHERE ${where} IF offset <= ?`,
    purgeIfSame: `DELETE FROM ${t} WHERE ${where} IF generation = ? AND offset = ?`,
  };
}

/** A snapshot row's pending key timers (its `metadata`; a row read without that column has none). */
function decodeTimers(row: types.Row, where: ConstructorParameters<typeof CorruptSnapshotError>[0]): readonly KeyTimer[] | undefined {
  const metadata = row.get('metadata') as string | null | undefined;
  try {
    return timersFromMetadata(metadata);
  } catch (err) {
    throw new CorruptSnapshotError(where, err);
  }
}
