import type { types } from 'cassandra-driver';
import type { Codec } from '../../core/codec/codec';
import { decodeRecord } from '../../core/codec/errors';
import type { JournalStore } from '../journal-store';
import type { JournalEvent, TopicPartition } from '../../core/persistence-types';
import { CassandraPersistenceError } from './errors';
import type { ConsistencyOverride } from './options';
import { type CassandraSession, long, toNumber } from './session';

export interface CassandraJournalStoreOptions<V> {
  readonly session: CassandraSession;
  readonly keyspace: string;
  readonly table: string;
  readonly applicationId: string;
  readonly groupId: string;
  /** Encodes event values to the stored bytes and back: the flow's value codec, so `value` holds the input's bytes. */
  readonly codec: Codec<V>;
  readonly consistency: Required<ConsistencyOverride>;
  /** TTL of journal rows in seconds; 0: none. */
  readonly ttlSeconds: number;
}

/**
 * Per-key journals in kafka-flow's records table: one row per event, clustered by offset, so a
 * key's events read back in offset order and an append retried after a failure rewrites the same
 * rows. `value` is the event value encoded with the flow's value codec (for JSON, the input's
 * bytes); `headers` keeps one UTF-8 text per header name (the last, when kafkajs delivered
 * several); `timestamp_type` is left empty (kafkajs does not say which it is). Journals are not
 * fenced: a stale owner can append or delete a key's journal.
 */
export class CassandraJournalStore<V> implements JournalStore<V> {
  readonly table: string;
  private readonly o: CassandraJournalStoreOptions<V>;
  private readonly q: { append: string; read: string; delete: string };

  constructor(options: CassandraJournalStoreOptions<V>) {
    this.o = options;
    this.table = `${options.keyspace}.${options.table}`;
    const where = 'application_id = ? AND group_id = ? AND topic = ? AND partition = ? AND key = ?';
    this.q = {
      append:
        `UPDATE ${this.table} USING TTL ? SET created = ?, timestamp = ?, timestamp_type = ?, headers = ?, metadata = ?, value = ? ` +
        `WHERE ${where} AND offset = ?`,
      read: `SELECT offset, timestamp, headers, value FROM ${this.table} WHERE ${where} ORDER BY offset`,
      delete: `DELETE FROM ${this.table} WHERE ${where}`,
    };
  }

  async append(partition: TopicPartition, key: string, events: readonly JournalEvent<V>[]): Promise<void> {
    const now = new Date();
    const pk = this.pk(partition, key);
    const settled = await Promise.allSettled(
      events.map((e) => {
        const value = e.value === null || e.value === undefined ? null : this.o.codec.encode(e.value);
        return this.o.session.write(
          this.q.append,
          [this.o.ttlSeconds, now, toDate(e.timestamp), null, headersToMap(e.headers), '', value, ...pk, long(Number(e.offset))],
          this.o.consistency.write,
        );
      }),
    );
    const failed = settled.find((s) => s.status === 'rejected') as PromiseRejectedResult | undefined;
    if (failed) throw this.error('journal append', partition, key, failed.reason, true);
  }

  async *read(partition: TopicPartition, key: string): AsyncIterable<JournalEvent<V>> {
    const rows = this.o.session.rows(this.q.read, this.pk(partition, key), this.o.consistency.read);
    for (;;) {
      let next: IteratorResult<types.Row>;
      try {
        next = await rows.next();
      } catch (err) {
        throw this.error('journal read', partition, key, err, false);
      }
      if (next.done) return;
      const row = next.value;
      const offset = String(toNumber(row.get('offset')));
      const bytes = row.get('value') as Buffer | null;
      const value =
        bytes === null ? (null as V) : decodeRecord(this.o.codec, bytes, { topic: partition.topic, partition: partition.partition, key, offset });
      const timestamp = row.get('timestamp') as Date | null;
      yield {
        topic: partition.topic,
        partition: partition.partition,
        offset,
        key,
        value,
        timestamp: timestamp ? String(timestamp.getTime()) : '-1',
        headers: Object.freeze({ ...((row.get('headers') as Record<string, string> | null) ?? {}) }),
      };
    }
  }

  async delete(partition: TopicPartition, key: string): Promise<void> {
    try {
      await this.o.session.write(this.q.delete, this.pk(partition, key), this.o.consistency.write);
    } catch (err) {
      throw this.error('journal delete', partition, key, err, true);
    }
  }

  private pk(partition: TopicPartition, key: string): unknown[] {
    return [this.o.applicationId, this.o.groupId, partition.topic, partition.partition, key];
  }

  private error(operation: string, partition: TopicPartition, key: string, cause: unknown, writing: boolean) {
    return new CassandraPersistenceError(
      {
        operation,
        table: this.table,
        topic: partition.topic,
        partition: partition.partition,
        keys: [key],
        contactPoints: this.o.session.contactPoints,
        writing,
      },
      cause,
    );
  }
}

function toDate(timestamp: string): Date | null {
  const ms = Number(timestamp);
  return Number.isFinite(ms) && ms >= 0 ? new Date(ms) : null;
}

/** Headers as map<text, text>: UTF-8 text, the last value of a repeated header. */
export function headersToMap(headers: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, raw] of Object.entries(headers)) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value === undefined || value === null) continue;
    out[name] = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  }
  return out;
}
