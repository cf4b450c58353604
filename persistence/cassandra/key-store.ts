import { errors, types } from 'cassandra-driver';
import type { KeyStore } from '../key-store';
import type { TopicPartition } from '../../core/persistence-types';
import { CassandraPersistenceError } from './errors';
import { mapConcurrent } from './limiter';
import { type ConsistencyOverride, KEY_SCAN_ROWS } from './options';
import { keySegment, segmentChunks } from './segments';
import { type CassandraSession, long, utcDate } from './session';

/** Lists a partition's keys (what recovery and readAll walk). */
export interface KeyLister {
  /** `onShare`: the share (0–1) of the partition's segments listed so far. */
  list(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<string>;
}

export interface CassandraKeyStoreOptions {
  readonly session: CassandraSession;
  readonly keyspace: string;
  readonly table: string;
  readonly applicationId: string;
  readonly groupId: string;
  /** Segments a group's keys are spread over; must never change for existing data (default 10,000). */
  readonly segments: number;
  readonly consistency: Required<ConsistencyOverride>;
  /** TTL of key rows in seconds; 0: none. */
  readonly ttlSeconds: number;
  /** Listing queries at once. Default 32. */
  readonly listParallelism?: number;
  /** Segments per listing query. Default 100. */
  readonly segmentsPerQuery?: number;
  /** Rows of the whole table a listing reads in one scan before it lists segments instead. Default KEY_SCAN_ROWS; 0: never scan. */
  readonly scanRows?: number;
}

/** Rows per page of the whole-table scan. */
const SCAN_PAGE_ROWS = 5_000;

/**
 * kafka-flow's keys table: one row per key under the Cassandra partition
 * (application_id, group_id, segment), clustered by topic, partition and key, so that listing a
 * Kafka partition's keys reads every segment's slice for that topic and partition — no full-table
 * scan. Listing runs `segment IN (…)` queries of `segmentsPerQuery` segments, `listParallelism` at
 * a time (the fastest shape measured: docs/cassandra.md, options). Writes are plain (unconditional) like
 * kafka-flow's: the fence lives on the snapshots table.
 */
export class CassandraKeyStore implements KeyStore, KeyLister {
  readonly table: string;
  /**
   * With a key TTL: the keys of delete markers, written without it (a marker must stay listed
   * until its purge removes the key). Without a TTL keys never expire, and markers' keys go
   * through `add`.
   */
  readonly pin?: (partition: TopicPartition, keys: readonly string[]) => Promise<void>;
  private readonly o: CassandraKeyStoreOptions;
  private readonly chunks: number[][];
  private readonly q: { add: string; touch: string; remove: string; list: string; scan: string; createdAt: string; touchAt: string; removeAt: string };
  /** Whether the table fits a scan: learnt by the first scan, 'big' for good once one read more than scanRows rows. */
  private tableSize: 'unknown' | 'small' | 'big' = 'unknown';
  /** The scan that finds out, while the size is unknown: the other listings wait for it rather than each read up to scanRows rows. */
  private probe?: Promise<void>;

  constructor(options: CassandraKeyStoreOptions) {
    if (!(Number.isInteger(options.segments) && options.segments >= 1)) {
      throw new RangeError(`key segments must be a whole number ≥ 1; got ${options.segments}`);
    }
    this.o = options;
    this.table = `${options.keyspace}.${options.table}`;
    this.chunks = segmentChunks(options.segments, options.segmentsPerQuery ?? 100);
    if (options.ttlSeconds > 0) this.pin = (partition, keys) => this.write('key pin', partition, keys, 0);
    const where = 'application_id = ? AND group_id = ? AND segment = ? AND topic = ? AND partition = ? AND key = ?';
    this.q = {
      add: `UPDATE ${this.table} USING TTL ? SET created = ?, created_date = ?, metadata = ? WHERE ${where}`,
      touch: `UPDATE ${this.table} USING TTL ? SET metadata = ? WHERE ${where}`,
      remove: `DELETE FROM ${this.table} WHERE ${where}`,
      list: `SELECT key FROM ${this.table} WHERE application_id = ? AND group_id = ? AND segment IN ? AND topic = ? AND partition = ?`,
      scan: `SELECT application_id, group_id, topic, partition, key FROM ${this.table}`,
      // Fencing 'timestamp': the row at the snapshot write's timestamp (write-timestamp.ts).
      createdAt: `UPDATE ${this.table} USING TTL ? AND TIMESTAMP ? SET created = ?, created_date = ?, metadata = ? WHERE ${where}`,
      touchAt: `UPDATE ${this.table} USING TTL ? AND TIMESTAMP ? SET metadata = ? WHERE ${where}`,
      removeAt: `DELETE FROM ${this.table} USING TIMESTAMP ? WHERE ${where}`,
    };
  }

  segmentOf(key: string): number {
    return keySegment(key, this.o.segments);
  }

  async add(partition: TopicPartition, keys: readonly string[]): Promise<void> {
    await this.write('key add', partition, keys, this.o.ttlSeconds);
  }

  private async write(operation: string, partition: TopicPartition, keys: readonly string[], ttlSeconds: number): Promise<void> {
    const now = new Date();
    const date = utcDate(now);
    await this.writeAll(operation, partition, keys, (key) => [this.q.add, [ttlSeconds, now, date, '', ...this.pk(partition, key)]]);
  }

  /** Keeps `keys` listed (the row written again if it went), `created` unchanged; the keys TTL renewed with the snapshot's. */
  async touch(partition: TopicPartition, keys: readonly string[]): Promise<void> {
    await this.writeAll('key touch', partition, keys, (key) => [this.q.touch, [this.o.ttlSeconds, '', ...this.pk(partition, key)]]);
  }

  async remove(partition: TopicPartition, keys: readonly string[]): Promise<void> {
    await this.writeAll('key remove', partition, keys, (key) => [this.q.remove, this.pk(partition, key)]);
  }

  /**
   * Fencing 'timestamp': lists `key` at write timestamp `at` — `created` for a key first stored
   * now (kafka-flow's created/created_date), else only a cell that keeps the row listed; `pinned`
   * (a delete marker's key) without the keys TTL.
   */
  async listAt(partition: TopicPartition, key: string, at: types.Long, o: { pinned: boolean; created: boolean }): Promise<void> {
    const ttl = o.pinned ? 0 : this.o.ttlSeconds;
    const now = new Date();
    const [query, params] = o.created
      ? [this.q.createdAt, [ttl, at, now, utcDate(now), '', ...this.pk(partition, key)]]
      : [this.q.touchAt, [ttl, at, '', ...this.pk(partition, key)]];
    await this.writeOne('key add', partition, key, query, params);
  }

  /** Fencing 'timestamp': unlists `key` at write timestamp `at` (a newer owner's listing stays). */
  async unlistAt(partition: TopicPartition, key: string, at: types.Long): Promise<void> {
    await this.writeOne('key remove', partition, key, this.q.removeAt, [at, ...this.pk(partition, key)]);
  }

  private async writeOne(operation: string, partition: TopicPartition, key: string, query: string, params: unknown[]): Promise<void> {
    try {
      await this.o.session.write(query, params, this.o.consistency.write);
    } catch (err) {
      throw new CassandraPersistenceError(
        { operation, table: this.table, topic: partition.topic, partition: partition.partition, keys: [key], contactPoints: this.o.session.contactPoints, writing: true },
        err,
      );
    }
  }

  /**
   * The partition's keys: from one scan of the whole table while it is small (KEY_SCAN_ROWS),
   * else segment by segment. A scan that fails (a node down, too many tombstones) falls back to
   * the segments, whose error says what is wrong if it lasts. Either way the keys listed are those
   * written before the listing began, or during it.
   */
  async *list(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<string> {
    const scanned = await this.scanIfSmall(partition);
    if (scanned) {
      onShare?.(1);
      yield* scanned;
      return;
    }
    yield* this.listSegments(partition, onShare);
  }

  private async scanIfSmall(partition: TopicPartition): Promise<string[] | undefined> {
    const limit = this.o.scanRows ?? KEY_SCAN_ROWS;
    if (limit === 0 || this.tableSize === 'big') return undefined;
    if (this.tableSize === 'small') return this.scan(partition, limit);
    if (this.probe) {
      await this.probe;
      return this.scanIfSmall(partition);
    }
    const scan = this.scan(partition, limit).finally(() => {
      this.probe = undefined;
    });
    this.probe = scan.then(() => undefined);
    return scan;
  }

  /** The partition's keys from a scan of the whole table, or undefined once it read more than `limit` rows or failed. */
  private async scan(partition: TopicPartition, limit: number): Promise<string[] | undefined> {
    const { applicationId, groupId } = this.o;
    const keys: string[] = [];
    let rows = 0;
    try {
      for await (const row of this.o.session.rows(this.q.scan, [], this.o.consistency.read, SCAN_PAGE_ROWS)) {
        if (++rows > limit) {
          this.tableSize = 'big';
          return undefined;
        }
        if (row.get('partition') === partition.partition && row.get('topic') === partition.topic && row.get('group_id') === groupId && row.get('application_id') === applicationId) {
          keys.push(row.get('key') as string);
        }
      }
    } catch (err) {
      // Too many tombstones (or a node that cannot serve range reads): this table is not scanned again here.
      if (err instanceof errors.ResponseError && err.code === types.responseErrorCodes.readFailure) this.tableSize = 'big';
      return undefined;
    }
    this.tableSize = 'small';
    return keys;
  }

  private async *listSegments(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<string> {
    const { applicationId, groupId } = this.o;
    const parallelism = this.o.listParallelism ?? 32;
    const pages = mapConcurrent(this.chunks, parallelism, async (chunk) => {
      const keys: string[] = [];
      const params = [applicationId, groupId, chunk.map(long), partition.topic, partition.partition];
      try {
        for await (const row of this.o.session.rows(this.q.list, params, this.o.consistency.read)) keys.push(row.get('key') as string);
      } catch (err) {
        throw new CassandraPersistenceError(
          {
            operation: `key listing (segments ${chunk[0]}–${chunk[chunk.length - 1]})`,
            table: this.table,
            topic: partition.topic,
            partition: partition.partition,
            contactPoints: this.o.session.contactPoints,
          },
          err,
        );
      }
      return keys;
    });
    let listed = 0;
    for await (const keys of pages) {
      onShare?.(++listed / this.chunks.length);
      yield* keys;
    }
  }

  private pk(partition: TopicPartition, key: string): unknown[] {
    const { applicationId, groupId } = this.o;
    return [applicationId, groupId, long(this.segmentOf(key)), partition.topic, partition.partition, key];
  }

  private async writeAll(
    operation: string,
    partition: TopicPartition,
    keys: readonly string[],
    statement: (key: string) => [string, unknown[]],
  ): Promise<void> {
    const settled = await Promise.allSettled(
      keys.map((key) => {
        const [query, params] = statement(key);
        return this.o.session.write(query, params, this.o.consistency.write) as Promise<types.ResultSet>;
      }),
    );
    const failed = keys.filter((_, i) => settled[i]!.status === 'rejected');
    if (failed.length > 0) {
      const first = settled.find((s) => s.status === 'rejected') as PromiseRejectedResult;
      throw new CassandraPersistenceError(
        {
          operation,
          table: this.table,
          topic: partition.topic,
          partition: partition.partition,
          keys: failed,
          contactPoints: this.o.session.contactPoints,
          writing: true,
        },
        first.reason,
      );
    }
  }
}
