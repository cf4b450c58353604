/**
 * The three tables in kafka-flow's shape (CassandraSnapshots, CassandraKeys, CassandraJournals),
 * created on start when missing and checked column by column when present. One column is ours:
 * `generation`, the consumer generation of the owner that wrote the row, which the 'lwt' fence
 * compares — on the snapshots table a regular column, on the journals table a static one (one per
 * key's journal: what its fenced purge compares). A kafka-flow table without it gets it added
 * (ALTER TABLE … ADD, a metadata-only change) unless autoCreate is off.
 *
 * Creating tables from several processes at once can leave a multi-node cluster (before
 * Cassandra's transactional metadata) with a schema disagreement; kafka-flow takes a lock for it.
 * Here every start first reads system_schema and only runs DDL for what is missing, so the race
 * is limited to the very first start: start one worker first, or create the schema ahead with
 * `schemaCql` (autoCreate: false). A table found there is waited for until the node serves it.
 */
import type { Client } from 'cassandra-driver';
import { bucketsComment, bucketsFromComment } from './buckets';
import { CassandraBucketMismatchError, CassandraSchemaError } from './errors';
import type { SnapshotLayout, TableRole } from './options';

export interface ColumnSpec {
  readonly name: string;
  /** As system_schema.columns spells it. */
  readonly type: string;
  readonly kind: 'partition_key' | 'clustering' | 'regular' | 'static';
}

export interface TableSpec {
  readonly role: TableRole;
  readonly columns: readonly ColumnSpec[];
  /** Table options after WITH, if any. */
  readonly with?: string;
}

const pk = (name: string, type: string): ColumnSpec => ({ name, type, kind: 'partition_key' });
const ck = (name: string, type: string): ColumnSpec => ({ name, type, kind: 'clustering' });
const col = (name: string, type: string): ColumnSpec => ({ name, type, kind: 'regular' });

/** The column the 'lwt' fence adds to kafka-flow's snapshots table. */
export const GENERATION_COLUMN = col('generation', 'bigint');
/** The column the 'lwt' fence adds to kafka-flow's journals table: one per key's journal. */
export const JOURNAL_GENERATION_COLUMN: ColumnSpec = { name: 'generation', type: 'bigint', kind: 'static' };

export const SNAPSHOTS_TABLE: TableSpec = {
  role: 'snapshots',
  columns: [
    pk('application_id', 'text'),
    pk('group_id', 'text'),
    pk('topic', 'text'),
    pk('partition', 'int'),
    pk('key', 'text'),
    col('offset', 'bigint'),
    col('created', 'timestamp'),
    col('metadata', 'text'),
    col('value', 'blob'),
    GENERATION_COLUMN,
  ],
};

/**
 * The opt-in `by-partition` layout's snapshots table: kafka-flow's columns, but a Cassandra
 * partition holds one bucket of a Kafka partition's keys, the key being the clustering column —
 * recovery scans `buckets` partitions instead of listing the keys table and reading each key's
 * own partition. The bucket count is recorded in the table's comment (buckets.ts).
 */
export function snapshotsByPartitionTable(buckets: number): TableSpec {
  return {
    role: 'snapshots',
    columns: [
      pk('application_id', 'text'),
      pk('group_id', 'text'),
      pk('topic', 'text'),
      pk('partition', 'int'),
      pk('bucket', 'int'),
      ck('key', 'text'),
      col('offset', 'bigint'),
      col('created', 'timestamp'),
      col('metadata', 'text'),
      col('value', 'blob'),
      GENERATION_COLUMN,
    ],
    with: `comment = ${cqlString(bucketsComment(buckets))}`,
  };
}

export const KEYS_TABLE: TableSpec = {
  role: 'keys',
  columns: [
    pk('application_id', 'text'),
    pk('group_id', 'text'),
    pk('segment', 'bigint'),
    ck('topic', 'text'),
    ck('partition', 'int'),
    ck('key', 'text'),
    col('created', 'timestamp'),
    col('created_date', 'date'),
    col('metadata', 'text'),
  ],
  with: "compaction = {'class': 'org.apache.cassandra.db.compaction.LeveledCompactionStrategy'}",
};

export const JOURNALS_TABLE: TableSpec = {
  role: 'journals',
  columns: [
    pk('application_id', 'text'),
    pk('group_id', 'text'),
    pk('topic', 'text'),
    pk('partition', 'int'),
    pk('key', 'text'),
    ck('offset', 'bigint'),
    col('created', 'timestamp'),
    col('timestamp', 'timestamp'),
    col('timestamp_type', 'text'),
    col('headers', 'map<text, text>'),
    col('metadata', 'text'),
    col('value', 'blob'),
    JOURNAL_GENERATION_COLUMN,
  ],
};

export const TABLE_SPECS: Readonly<Record<TableRole, TableSpec>> = {
  snapshots: SNAPSHOTS_TABLE,
  keys: KEYS_TABLE,
  journals: JOURNALS_TABLE,
};

export interface SchemaSettings {
  keyspace: string;
  replication: Record<string, string | number>;
  tables: Record<TableRole, string>;
  autoCreate: boolean;
  /** The snapshots table's layout. Default 'kafka-flow'. */
  layout?: SnapshotLayout;
  /** The by-partition layout's bucket count. */
  buckets?: number;
}

/** The table a role has under the settings' layout. */
export function tableSpec(settings: Pick<SchemaSettings, 'layout' | 'buckets'>, role: TableRole): TableSpec {
  if (role === 'snapshots' && settings.layout === 'by-partition') return snapshotsByPartitionTable(settings.buckets ?? 0);
  return TABLE_SPECS[role];
}

function cqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

export function createKeyspaceCql(keyspace: string, replication: Record<string, string | number>): string {
  const map = Object.entries(replication)
    .map(([k, v]) => `${cqlString(k)}: ${cqlString(String(v))}`)
    .join(', ');
  return `CREATE KEYSPACE IF NOT EXISTS ${keyspace} WITH replication = {${map}}`;
}

export function createTableCql(keyspace: string, table: string, spec: TableSpec): string {
  const columns = spec.columns.map((c) => `  ${c.name} ${c.type.toUpperCase()}${c.kind === 'static' ? ' STATIC' : ''}`).join(',\n');
  const partition = spec.columns.filter((c) => c.kind === 'partition_key').map((c) => c.name);
  const clustering = spec.columns.filter((c) => c.kind === 'clustering').map((c) => c.name);
  const key = [`(${partition.join(', ')})`, ...clustering].join(', ');
  return (
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${table} (\n${columns},\n  PRIMARY KEY(${key})\n)` +
    (spec.with ? `\nWITH ${spec.with}` : '')
  );
}

/** kafka-flow's index on the keys table's created_date (its tooling finds keys by day with it). */
export function createKeysIndexCql(keyspace: string, table: string): string {
  return `CREATE INDEX IF NOT EXISTS ${table}_created_date_idx ON ${keyspace}.${table} (created_date)`;
}

/** Every statement that creates the schema for `roles`: to run ahead of time with autoCreate off. */
export function schemaCql(settings: SchemaSettings, roles: readonly TableRole[]): string[] {
  const out = [createKeyspaceCql(settings.keyspace, settings.replication)];
  for (const role of roles) {
    out.push(createTableCql(settings.keyspace, settings.tables[role], tableSpec(settings, role)));
    if (role === 'keys') out.push(createKeysIndexCql(settings.keyspace, settings.tables.keys));
  }
  return out;
}

interface FoundColumn {
  type: string;
  kind: string;
  position: number;
}

/**
 * What is wrong with an existing table's columns, one line each (empty when it fits). Extra
 * columns are fine. `generation` is reported separately (it can be added).
 */
export function columnProblems(spec: TableSpec, found: ReadonlyMap<string, FoundColumn>): { problems: string[]; missingGeneration: boolean } {
  const problems: string[] = [];
  let missingGeneration = false;
  for (const c of spec.columns) {
    const f = found.get(c.name);
    if (!f) {
      if ((spec.role === 'snapshots' || spec.role === 'journals') && c.name === GENERATION_COLUMN.name) missingGeneration = true;
      else problems.push(`column ${c.name} (${c.type}) is missing`);
      continue;
    }
    if (normalizeType(f.type) !== normalizeType(c.type)) problems.push(`column ${c.name} is ${f.type}, needs ${c.type}`);
    else if (c.kind === 'static' && f.kind !== 'static') problems.push(`column ${c.name} is ${f.kind}, needs static`);
  }
  for (const kind of ['partition_key', 'clustering'] as const) {
    const want = spec.columns.filter((c) => c.kind === kind).map((c) => c.name);
    const have = [...found.entries()]
      .filter(([, f]) => f.kind === kind)
      .sort((a, b) => a[1].position - b[1].position)
      .map(([n]) => n);
    if (want.join(',') !== have.join(',')) {
      const what = kind === 'partition_key' ? 'partition key' : 'clustering columns';
      problems.push(`${what} is (${have.join(', ')}), needs (${want.join(', ')})`);
    }
  }
  return { problems, missingGeneration };
}

function normalizeType(t: string): string {
  return t.replace(/\s+/g, '').toLowerCase();
}

async function tableColumns(client: Client, keyspace: string, table: string): Promise<Map<string, FoundColumn>> {
  const rs = await client.execute(
    'SELECT column_name, type, kind, position FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
    [keyspace, table],
    { prepare: true },
  );
  return new Map(
    rs.rows.map((r) => [
      String(r.get('column_name')),
      { type: String(r.get('type')), kind: String(r.get('kind')), position: Number(r.get('position')) },
    ]),
  );
}

export interface EnsureSchemaResult {
  /** Statements run (DDL), for logs and tests. */
  readonly created: string[];
}

/**
 * Makes sure the keyspace and the tables of `roles` exist with the columns the backend needs.
 * `needsGeneration`: the snapshots and journals tables must have the `generation` column ('lwt' fencing).
 */
export async function ensureSchema(
  client: Client,
  settings: SchemaSettings,
  roles: readonly TableRole[],
  needsGeneration: boolean,
): Promise<EnsureSchemaResult> {
  const created: string[] = [];
  const run = async (cql: string) => {
    await client.execute(cql);
    created.push(cql);
  };
  const { keyspace } = settings;
  const ks = await client.execute('SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?', [keyspace], {
    prepare: true,
  });
  if (ks.rows.length === 0) {
    if (!settings.autoCreate) {
      throw new CassandraSchemaError(
        `keyspace ${keyspace} does not exist and autoCreate is off: create it (e.g. ${createKeyspaceCql(keyspace, settings.replication)}) or turn autoCreate on`,
      );
    }
    await run(createKeyspaceCql(keyspace, settings.replication));
  }
  for (const role of roles) {
    const spec = tableSpec(settings, role);
    const table = settings.tables[role];
    let found = await tableColumns(client, keyspace, table);
    if (found.size === 0) {
      if (!settings.autoCreate) {
        throw new CassandraSchemaError(
          `table ${keyspace}.${table} (${role}) does not exist and autoCreate is off: create it with\n${createTableCql(keyspace, table, spec)}`,
          table,
        );
      }
      await run(createTableCql(keyspace, table, spec));
      if (role === 'keys') await run(createKeysIndexCql(keyspace, table));
      found = await tableColumns(client, keyspace, table);
    }
    await tableServed(client, keyspace, table);
    const { problems, missingGeneration } = columnProblems(spec, found);
    if (problems.length > 0) {
      throw new CassandraSchemaError(
        `table ${keyspace}.${table} (${role}) exists but does not match what the backend needs: ${problems.join('; ')}. ` +
          `Point the backend at another table name (tables.${role}) or migrate it to:\n${createTableCql(keyspace, table, spec)}`,
        table,
      );
    }
    if (role === 'snapshots' && settings.layout === 'by-partition') {
      await checkBuckets(client, keyspace, table, settings.buckets ?? 0);
    }
    if (missingGeneration && needsGeneration) {
      const column = role === 'journals' ? JOURNAL_GENERATION_COLUMN : GENERATION_COLUMN;
      const alter = `ALTER TABLE ${keyspace}.${table} ADD ${column.name} ${column.type}${column.kind === 'static' ? ' static' : ''}`;
      if (!settings.autoCreate) {
        throw new CassandraSchemaError(
          `table ${keyspace}.${table} has no ${GENERATION_COLUMN.name} column, which fencing 'lwt' needs, and autoCreate is off: run ${alter}`,
          table,
        );
      }
      await run(alter);
    }
  }
  return { created };
}

/** How long a start waits for a table system_schema lists to be served (another process's creation in flight). */
export const TABLE_SERVED_TIMEOUT_MS = 60_000;

/**
 * Waits until `table` answers a query. system_schema lists a table another process is creating
 * before the node serves it (hundreds of ms on an idle node, seconds under load: "table … does not
 * exist"), so a start that found it there would otherwise fail its first recovery.
 */
async function tableServed(client: Client, keyspace: string, table: string): Promise<void> {
  const deadline = Date.now() + TABLE_SERVED_TIMEOUT_MS;
  for (;;) {
    try {
      await client.execute(`SELECT * FROM ${keyspace}.${table} LIMIT 1`);
      return;
    } catch (err) {
      if (!isTableNotServed(err)) throw err;
      if (Date.now() > deadline) {
        throw new CassandraSchemaError(
          `table ${keyspace}.${table} is listed in system_schema but the node has not served it for ${TABLE_SERVED_TIMEOUT_MS / 1000} s (a creation still spreading, or a schema disagreement: check nodetool describecluster)`,
          table,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * The node does not serve the table (yet): an Invalid (0x2200) "does not exist" / "unconfigured
 * table", or, a moment later in the same creation, a server error (0x0000) "Unknown CF <id>" — the
 * table's metadata is there, its column family not registered yet.
 */
function isTableNotServed(err: unknown): boolean {
  const e = err as { code?: number; message?: string } | undefined;
  if (e?.code === 0x2200) return /does not exist|unconfigured table/i.test(e.message ?? '');
  return e?.code === 0x0000 && /Unknown CF/i.test(e.message ?? '');
}

/**
 * A by-partition table's bucket count (its comment) must be the backend's: refused with
 * CassandraBucketMismatchError otherwise, and with CassandraSchemaError when the comment records none.
 */
async function checkBuckets(client: Client, keyspace: string, table: string, buckets: number): Promise<void> {
  const rs = await client.execute('SELECT comment FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?', [keyspace, table], {
    prepare: true,
  });
  const comment = rs.first()?.get('comment') as string | null | undefined;
  const recorded = bucketsFromComment(comment);
  if (recorded === undefined) {
    throw new CassandraSchemaError(
      `table ${keyspace}.${table} has the by-partition columns but its comment does not record a bucket count (${JSON.stringify(comment ?? '')}). ` +
        `If its rows were written with ${buckets} buckets (or it is empty), record it with: ALTER TABLE ${keyspace}.${table} WITH comment = ${cqlString(bucketsComment(buckets))}`,
      table,
    );
  }
  if (recorded !== buckets) throw new CassandraBucketMismatchError(`${keyspace}.${table}`, recorded, buckets);
}
