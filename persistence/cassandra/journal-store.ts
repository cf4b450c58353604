import type { types } from 'cassandra-driver';
import type { Codec } from '../../core/codec/codec';
import { decodeRecord } from '../../core/codec/errors';
import { SnapshotWriteFencedError } from '../../core/fence-errors';
import { offsetFromRecord, offsetText } from '../../flow/offsets';
import type { JournalStore } from '../journal-store';
import type { JournalEvent, TopicPartition } from '../../core/persistence-types';
import { CassandraPersistenceError, CassandraWriteRefusedError } from './errors';
import { journalPurgeStep, MAX_ROUNDS } from './fencing';
import type { ConsistencyOverride, Fencing } from './options';
import { type CassandraSession, hasColumn, long, toNumberOrNull } from './session';

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
  /**
   * 'lwt': appends record the writer's generation on the key's journal (a static column) and a
   * purge is a conditional batch on it. Default 'none': kafka-flow's plain writes.
   */
  readonly fencing?: Fencing;
  /** 'lwt': how long a purged journal keeps its generation as a fence, in seconds; 0: nothing is left. */
  readonly fenceRowTtlSeconds?: number;
  /** The writer's consumer generation ('lwt'); without one, appends and purges are plain. */
  readonly generation?: number;
}

/**
 * Per-key journals in kafka-flow's records table: one row per event, clustered by offset, so a
 * key's events read back in offset order and an append retried after a failure rewrites the same
 * rows. `value` is the event value encoded with the flow's value codec (for JSON, the input's
 * bytes); `headers` keeps one UTF-8 text per header name (the last, when kafkajs delivered
 * several); `timestamp_type` is left empty (kafkajs does not say which it is).
 *
 * Appends are plain writes (a stale owner's append rewrites the same events at the same offsets).
 * A purge removes the key's whole journal, so under fencing 'lwt' it is fenced: every append also
 * sets the journal's static `generation` to the writer's, and the purge is a conditional batch
 * (`IF generation <= G`, then the partition's deletion) — a stale owner's purge of a journal a
 * newer generation has appended to is refused with SnapshotWriteFencedError, nothing removed.
 * The purge leaves the generation behind for `fenceRowTtlSeconds` (0: nothing).
 */
export class CassandraJournalStore<V> implements JournalStore<V> {
  readonly table: string;
  readonly generation: number | undefined;
  private readonly o: CassandraJournalStoreOptions<V>;
  private readonly q: ReturnType<typeof journalStatements>;

  constructor(options: CassandraJournalStoreOptions<V>) {
    this.o = options;
    this.generation = options.generation;
    this.table = `${options.keyspace}.${options.table}`;
    this.q = journalStatements(this.table);
  }

  /** The same store writing as `generation` (one per assignment of a partition). */
  withGeneration(generation: number | undefined): CassandraJournalStore<V> {
    return new CassandraJournalStore<V>({ ...this.o, generation });
  }

  private get fenced(): boolean {
    return this.o.fencing === 'lwt' && this.generation !== undefined;
  }

  async append(partition: TopicPartition, key: string, events: readonly JournalEvent<V>[]): Promise<void> {
    const now = new Date();
    const pk = this.pk(partition, key);
    const settled = await Promise.allSettled(
      events.map((e) => {
        const value = e.value === null || e.value === undefined ? null : this.o.codec.encode(e.value);
        const set = [this.o.ttlSeconds, now, toDate(e.timestamp), null, headersToMap(e.headers), '', value];
        const [query, params] = this.fenced
          ? [this.q.appendWithGeneration, [...set, long(this.generation!), ...pk, long(offsetFromRecord(e.offset))]]
          : [this.q.append, [...set, ...pk, long(offsetFromRecord(e.offset))]];
        return this.o.session.write(query, params, this.o.consistency.write);
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
      // A purged journal's fence (its static generation alone) reads as a row without an offset.
      const stored = toNumberOrNull(row.get('offset'));
      if (stored === null) continue;
      const offset = offsetText(stored);
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
      if (this.fenced) await this.fencedDelete(partition, key);
      else await this.o.session.write(this.q.delete, this.pk(partition, key), this.o.consistency.write);
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError || err instanceof CassandraWriteRefusedError) throw err;
      throw this.error('journal delete', partition, key, err, true);
    }
  }

  /**
   * The purge under 'lwt': the journal goes only if no newer generation has written it. Refused,
   * Cassandra answers with the stored generation: newer → fenced; none (a journal written
   * without one: kafka-flow, fencing 'none'; or no journal at all) → the same batch on
   * `generation = null`.
   */
  private async fencedDelete(partition: TopicPartition, key: string): Promise<void> {
    const g = this.generation!;
    const pk = this.pk(partition, key);
    const ttl = this.o.fenceRowTtlSeconds ?? 0;
    // What stays of the journal: its generation for fenceRowTtl, or nothing.
    const keep = ttl > 0 ? long(g) : null;
    let expected: 'not-newer' | 'none' = 'not-newer';
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const claim =
        expected === 'none'
          ? { query: this.q.claimIfNone, params: [ttl, keep, ...pk] }
          : { query: this.q.claimIfNotNewer, params: [ttl, keep, ...pk, long(g)] };
      const rs = await this.o.session.writeBatch([claim, { query: this.q.delete, params: pk }], this.o.consistency.write);
      if (rs.wasApplied()) return;
      const next = journalPurgeStep(hasColumn(rs, 'generation') ? toNumberOrNull(rs.first()?.get('generation')) : undefined, g);
      if (next.step === 'fenced') {
        throw new SnapshotWriteFencedError(partition.topic, partition.partition, `the purge of a journal on table ${this.table} was refused: ${next.reason}`, {
          reason: 'store',
        });
      }
      expected = next.expected;
    }
    throw new CassandraWriteRefusedError({ table: this.table, topic: partition.topic, partition: partition.partition }, [
      { key, by: 'contended', reason: `the journal's purge was still contended after ${MAX_ROUNDS} statements` },
    ]);
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

/** The CQL of the journals table, by what it does. */
function journalStatements(t: string) {
  const where = 'application_id = ? AND group_id = ? AND topic = ? AND partition = ? AND key = ?';
  const set = 'created = ?, timestamp = ?, timestamp_type = ?, headers = ?, metadata = ?, value = ?';
  return {
    append: `UPDATE ${t} USING TTL ? SET ${set} WHERE ${where} AND offset = ?`,
    // fencing 'lwt': the journal (its static column) records its last writer's generation.
    appendWithGeneration: `UPDATE ${t} USING TTL ? SET ${set}, generation = ? WHERE ${where} AND offset = ?`,
    read: `SELECT offset, timestamp, headers, value FROM ${t} WHERE ${where} ORDER BY offset`,
    delete: `DELETE FROM ${t} WHERE ${where}`,
    // The condition of a fenced purge's batch (with the delete above); it sets what stays.
    claimIfNotNewer: `UPDATE ${t} USING TTL ? SET generation = ? WHERE ${where} IF generation <= ?`,
    claimIfNone: `UPDATE ${t} USING TTL ? SET generation = ? WHERE ${where} IF generation = null`,
  };
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
