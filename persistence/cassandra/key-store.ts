import type { types } from 'cassandra-driver';
import type { KeyStore } from '../key-store';
import type { TopicPartition } from '../../core/persistence-types';
import { CassandraPersistenceError } from './errors';
import { mapConcurrent } from './limiter';
import type { ConsistencyOverride } from './options';
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
}

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
  private readonly q: { add: string; touch: string; remove: string; list: string; createdAt: string; touchAt: string; removeAt: string };

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

  async *list(partition: TopicPartition, onShare?: (share: number) => void): AsyncIterable<string> {
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
