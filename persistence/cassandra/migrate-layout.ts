/**
 * Moves a flow's snapshots from kafka-flow's table (`snapshots_v2`, one Cassandra partition per
 * key) into the by-partition layout's table: every row of the flow's application id and group is
 * read (a paged scan filtered by application_id and group_id: the old table cannot list a group's
 * keys otherwise), and written into its bucket with the stored offset and generation by the
 * fence's own conditional writes — so a row lands only where the new table holds nothing newer.
 * Running it again is safe: rows already moved are rewritten as they are (an identical write is a
 * no-op), and keys the flow has written since (under the by-partition layout) are kept.
 *
 * The states' bytes are copied as stored (no decoding; compression framing included). Delete
 * markers (rows without a value) are copied as delete markers (which never expire: the flow purges
 * them once its committed offset passes them); rows whose cells have all expired are skipped.
 * Snapshots get the target's `ttl.snapshots` from the time of the move, not what remained of the old ones.
 * The old table is left as it is. Stop the flow's workers first (or expect its stale writes to
 * be refused by the fence, as after any rebalance); see docs/cassandra.md, "Migrating".
 */
import type { types } from 'cassandra-driver';
import { type Logger, silentLogger } from '../../core/logger';
import type { TopicPartition } from '../../core/persistence-types';
import type { SnapshotWrite } from '../snapshot-store';
import type { CassandraBackend } from './backend';
import { CassandraPersistenceError, CassandraSchemaError } from './errors';
import { DEFAULT_TABLES } from './options';
import { toNumberOrNull } from './session';
import { CassandraSnapshotStore } from './snapshot-store';

export interface MigrateSnapshotsOptions {
  /** The keyspace of the table to read. Default: the target's keyspace. */
  readonly fromKeyspace?: string;
  /** The kafka-flow layout table to read. Default 'snapshots_v2'. */
  readonly fromTable?: string;
  /** Rows per page of the scan (each page is written before the next is read). Default 1,000. */
  readonly pageSize?: number;
  readonly logger?: Logger;
  /** Called after each page with the counts so far. */
  readonly onProgress?: (report: MigrationReport) => void;
}

export interface MigrationReport {
  /** Rows of the flow read from the old table. */
  rowsRead: number;
  /** Rows written (or already there as they are) in the new table. */
  written: number;
  /** Rows not written because the new table holds a newer version of the key (the fence refused them). */
  keptNewer: number;
  /** Of the rows read, delete markers (no value). */
  deleteMarkers: number;
  /** Kafka partitions seen, as "topic/partition". */
  partitions: number;
  elapsedMs: number;
}

/** Bytes as they are: the stored value is copied, not decoded. */
const bytesCodec = { encode: (b: Buffer) => b, decode: (b: Buffer) => b };

/**
 * Copies the flow's rows of the kafka-flow layout table into `target`'s by-partition table.
 * `target` is the flow's backend started with `layout: 'by-partition'` (e.g.
 * `CassandraBackend.forFlow(definition)`), which has created or checked the new table.
 */
export async function migrateSnapshotsToByPartition(
  target: CassandraBackend<unknown, unknown>,
  options: MigrateSnapshotsOptions = {},
): Promise<MigrationReport> {
  const started = performance.now();
  const { settings, session, groupId } = target;
  const log = options.logger ?? silentLogger;
  if (settings.layout !== 'by-partition' || !target.snapshots) {
    throw new CassandraSchemaError(
      `the migration writes into the by-partition layout: start the target backend with layout: 'by-partition' (this one has layout '${settings.layout}'${target.snapshots ? '' : ', no snapshots'})`,
    );
  }
  const fromKeyspace = options.fromKeyspace ?? settings.keyspace;
  const fromTable = options.fromTable ?? DEFAULT_TABLES.snapshots;
  const from = `${fromKeyspace}.${fromTable}`;
  if (from === target.snapshots.table) throw new CassandraSchemaError(`the migration reads ${from} and writes ${target.snapshots.table}: they must differ`);
  const withGeneration = await sourceColumns(target, fromKeyspace, fromTable);
  const store = new CassandraSnapshotStore<Buffer>({
    session,
    keyspace: settings.keyspace,
    table: settings.tables.snapshots,
    applicationId: settings.applicationId,
    groupId,
    codec: bytesCodec,
    consistency: settings.consistency.snapshots,
    ttlSeconds: settings.ttlSeconds.snapshots,
    // Always the fence's conditional writes: a re-run, or a run after the flow started on the new
    // layout, never overwrites a newer row.
    fencing: 'lwt',
    fenceRowTtlSeconds: settings.fenceRowTtlSeconds,
    // A row the target holds at a newer offset (or as a marker at the same one) is kept, not an error.
    unsettled: 'not-applied',
    layout: 'by-partition',
    buckets: settings.buckets,
  });
  const report: MigrationReport = { rowsRead: 0, written: 0, keptNewer: 0, deleteMarkers: 0, partitions: 0, elapsedMs: 0 };
  const partitions = new Set<string>();
  const query =
    `SELECT topic, partition, key, offset, value${withGeneration ? ', generation' : ''} FROM ${from} ` +
    'WHERE application_id = ? AND group_id = ? ALLOW FILTERING';
  const params = [settings.applicationId, groupId];
  let pageState: string | undefined;
  do {
    let rs: types.ResultSet;
    try {
      rs = await session.read(query, params, settings.consistency.snapshots.read, options.pageSize ?? 1000, pageState);
    } catch (err) {
      throw new CassandraPersistenceError({ operation: 'snapshot migration scan', table: from, contactPoints: session.contactPoints }, err);
    }
    // One writeBatch per (Kafka partition, stored generation): the store writes as one generation.
    const groups = new Map<string, { partition: TopicPartition; generation: number | undefined; writes: SnapshotWrite<Buffer>[] }>();
    for (const row of rs.rows) {
      const partition = { topic: row.get('topic') as string, partition: row.get('partition') as number };
      const generation = withGeneration ? (toNumberOrNull(row.get('generation')) ?? undefined) : undefined;
      const key = row.get('key') as string;
      const stored = toNumberOrNull(row.get('offset'));
      // A row whose cells have all expired holds nothing.
      if (stored === null) continue;
      const offset = stored;
      const value = row.get('value') as Buffer | null;
      const id = `${partition.topic}\u0000${partition.partition}\u0000${generation ?? ''}`;
      partitions.add(`${partition.topic}/${partition.partition}`);
      let group = groups.get(id);
      if (!group) {
        group = { partition, generation, writes: [] };
        groups.set(id, group);
      }
      report.rowsRead++;
      if (value === null || value === undefined) {
        report.deleteMarkers++;
        group.writes.push({ kind: 'delete', key, offset });
      } else {
        group.writes.push({ kind: 'put', key, snapshot: { state: value, offset } });
      }
    }
    await Promise.all(
      [...groups.values()].map(async (g) => {
        const statuses = await store.withGeneration(g.generation).writeBatch(g.partition, g.writes);
        for (const s of statuses) {
          if (s === 'applied') report.written++;
          else report.keptNewer++;
        }
      }),
    );
    report.partitions = partitions.size;
    report.elapsedMs = Math.round(performance.now() - started);
    options.onProgress?.({ ...report });
    pageState = rs.pageState ?? undefined;
  } while (pageState);
  report.elapsedMs = Math.round(performance.now() - started);
  log.info({ from, to: target.snapshots.table, ...report }, 'cassandra: snapshots moved to the by-partition layout');
  return report;
}

/** Checks the source table is kafka-flow's snapshots table; whether it has the generation column. */
async function sourceColumns(target: CassandraBackend<unknown, unknown>, keyspace: string, table: string): Promise<boolean> {
  const rs = await target.session.client.execute(
    'SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
    [keyspace, table],
    { prepare: true },
  );
  const columns = new Map(rs.rows.map((r) => [String(r.get('column_name')), String(r.get('kind'))]));
  if (columns.size === 0) throw new CassandraSchemaError(`the table to migrate from, ${keyspace}.${table}, does not exist`, table);
  const needed = ['application_id', 'group_id', 'topic', 'partition', 'key', 'offset', 'value'];
  const missing = needed.filter((c) => !columns.has(c));
  if (missing.length > 0 || columns.get('key') !== 'partition_key') {
    throw new CassandraSchemaError(
      `the table to migrate from, ${keyspace}.${table}, is not a kafka-flow layout snapshots table (${missing.length > 0 ? `missing ${missing.join(', ')}` : 'key is not part of its partition key'})`,
      table,
    );
  }
  return columns.has('generation');
}
