/**
 * The Cassandra backend's options: the zod schema `defineFlow` validates a flow's
 * `persistence: { backend: 'cassandra', ... }` with, and their resolution (defaults, units) into
 * what the stores use. No cassandra-driver import here: `define-flow.ts` loads this module.
 */
import { z } from 'zod';
import { ConfigError } from '../../config/errors';
import { type Duration, durationSchema, toMillis } from '../../core/duration';
import { PERSISTENCE_MODES, type PersistenceMode } from '../../core/persistence-types';
import { DEFAULT_BUCKETS, MAX_BUCKETS } from './buckets';
import { MAX_TIMESTAMP_FENCE_EPOCH } from './write-timestamp';

/** Cassandra consistency levels by their CQL names. */
export const CONSISTENCY_LEVELS = [
  'ANY',
  'ONE',
  'TWO',
  'THREE',
  'QUORUM',
  'ALL',
  'LOCAL_QUORUM',
  'EACH_QUORUM',
  'LOCAL_ONE',
] as const;
export type ConsistencyLevelName = (typeof CONSISTENCY_LEVELS)[number];
export type SerialConsistencyName = 'SERIAL' | 'LOCAL_SERIAL';

/**
 * How snapshot writes are guarded against a stale owner (see docs/cassandra.md): 'lwt', a
 * lightweight transaction per write that refuses an older owner; 'timestamp', plain writes whose
 * write timestamps order owners (write-timestamp.ts: the same guarantee, several times cheaper,
 * snapshots modes only, one-way for a table); 'none', kafka-flow's unguarded writes.
 */
export type Fencing = 'lwt' | 'timestamp' | 'none';
export const FENCINGS = ['lwt', 'timestamp', 'none'] as const;

/**
 * How snapshots are laid out: `'kafka-flow'` (the default) is kafka-flow's `snapshots_v2` table,
 * one Cassandra partition per key, listed for recovery by the keys table — what the Scala
 * kafka-flow reads and writes. `'by-partition'` (opt-in) clusters a Kafka partition's keys in
 * `buckets` Cassandra partitions, so a recovery scans a few partitions instead of listing the keys
 * and reading each one (docs/cassandra.md); kafka-flow cannot read it.
 */
export type SnapshotLayout = 'kafka-flow' | 'by-partition';
export const SNAPSHOT_LAYOUTS = ['kafka-flow', 'by-partition'] as const;

/**
 * Recovery lists a partition's keys by one scan of the whole keys table while it holds at most this
 * many rows: listing by segments costs 10,000 partition reads however few keys there are (0.5–2 s
 * on an idle 2-core machine; 30 s each for four partitions recovering at once in the quick chaos
 * run), a small table's scan milliseconds. A scan of 10,000 rows costs about one segment listing
 * (bench:cassandra); at 2,000 the scan that finds a big table too big costs a fifth of one, once
 * per process.
 */
export const KEY_SCAN_ROWS = 2_000;

/** The by-partition layout's default table name (its primary key differs from snapshots_v2's). */
export const DEFAULT_BY_PARTITION_TABLE = 'snapshots_by_partition';

/** The three tables, for per-table settings. */
export type TableRole = 'snapshots' | 'keys' | 'journals';

export interface ConsistencyOverride {
  read?: ConsistencyLevelName;
  write?: ConsistencyLevelName;
}

/** kafka-flow's table names (CassandraSnapshots, CassandraKeys, CassandraJournals). */
export const DEFAULT_TABLES: Readonly<Record<TableRole, string>> = Object.freeze({
  snapshots: 'snapshots_v2',
  keys: 'keys',
  journals: 'records',
});
export const DEFAULT_KEYSPACE = 'kafka_flow';
/** kafka-flow's CassandraKeys.DefaultSegments. */
export const DEFAULT_KEY_SEGMENTS = 10_000;
export const DEFAULT_REPLICATION: Readonly<Record<string, string | number>> = Object.freeze({
  class: 'SimpleStrategy',
  replication_factor: 1,
});
export const DEFAULT_CONSISTENCY: ConsistencyLevelName = 'LOCAL_QUORUM';
/**
 * How long a purged key's fence (its row: offset and generation, no value; a journal's static
 * generation) is kept under 'lwt'. Only what a purge leaves expires: the committed offset has
 * passed it, so no replay needs it. Delete markers themselves never expire.
 */
export const DEFAULT_FENCE_ROW_TTL_MS = 86_400_000;
/** Cassandra's largest TTL: 20 years, in seconds. */
export const MAX_TTL_SECONDS = 630_720_000;

/**
 * The options a flow gives in `persistence: { backend: 'cassandra', ... }` besides `mode` and
 * `compressionThreshold`. Every one has a default.
 */
export interface CassandraFlowOptions {
  /** host:port of the first nodes to contact. Default: CASSANDRA_CONTACT_POINTS (127.0.0.1:9042). */
  contactPoints?: string[];
  /** The driver's local data center. Default 'datacenter1' (a single node's SimpleSnitch). */
  localDataCenter?: string;
  /** Default 'kafka_flow', as kafka-flow. */
  keyspace?: string;
  /** Replication of the keyspace when it is created here. Default SimpleStrategy, factor 1. */
  replication?: Record<string, string | number>;
  /** Create the keyspace, tables and missing `generation` column on start. Default true. */
  autoCreate?: boolean;
  /** The `application_id` column. Default: the flow's name. */
  applicationId?: string;
  /** Table names. Default kafka-flow's: snapshots_v2, keys, records. */
  tables?: Partial<Record<TableRole, string>>;
  /** Segments the keys table spreads a group's keys over. Default 10,000. Never lower it later. */
  keySegments?: number;
  /** TTL of written rows, per table. Default none. */
  ttl?: Partial<Record<TableRole, Duration>>;
  /** Read/write consistency per table. Default LOCAL_QUORUM. */
  consistency?: Partial<Record<TableRole, ConsistencyOverride>>;
  /** Serial consistency of the conditional snapshot writes. Default 'SERIAL'. */
  serialConsistency?: SerialConsistencyName;
  /**
   * Default 'lwt': every snapshot write is a lightweight transaction. 'timestamp': plain writes
   * ordered by the owner's generation in their write timestamps — the same guard at a fraction of
   * the cost, snapshots modes only, one-way for a table (see docs/cassandra.md).
   */
  fencing?: Fencing;
  /**
   * 'lwt': how long a purged key's fence row stays (0: the purge removes the row, conditionally).
   * Default 1 day. Delete markers never expire: they stand until the committed offset passes them.
   */
  fenceRowTtl?: Duration;
  /**
   * Added to every owner generation as `fenceEpoch × 2³²`. Raise it by one after the consumer
   * group was deleted and recreated (Kafka then restarts generations at 1, below the stored ones,
   * and every fenced write would be refused). Default 0; at most 15 with fencing 'timestamp'.
   */
  fenceEpoch?: number;
  /** Statements reading at once, over all partitions of the backend. Default 64. */
  maxConcurrentReads?: number;
  /** Statements writing at once, over all partitions of the backend. Default 64. */
  maxConcurrentWrites?: number;
  /** Key-listing queries at once during recovery. Default 32. */
  keyListParallelism?: number;
  /** Segments per key-listing query (`segment IN (...)`). Default 100. */
  segmentsPerQuery?: number;
  /**
   * Recovery reads the whole keys table in one scan, instead of listing its segments, while the
   * table holds at most this many rows. Default 2,000; 0: always list the segments.
   */
  keyScanRows?: number;
  /** The most key writes in one persist batch (one offset commit per batch). Default 1,000. */
  maxWritesPerBatch?: number;
  /**
   * Snapshots read per recovery query (`key IN (...)`). Default 100; 1 reads one key per query.
   * Journal mode reads one key's journal per query.
   */
  recoveryBatchSize?: number;
  /** Default 'kafka-flow' (snapshots_v2 + keys table); 'by-partition': see SnapshotLayout. */
  layout?: SnapshotLayout;
  /**
   * The by-partition layout's buckets per Kafka partition (default 256, at most 65,536). Fixed for
   * a table: it is recorded in the table's comment, and a backend with another count is refused.
   */
  buckets?: number;
}

const name = z
  .string()
  .regex(/^[a-z][a-z0-9_]{0,47}$/, 'a Cassandra name: a lowercase letter, then lowercase letters, digits or "_", 48 at most');
const consistency = z.enum(CONSISTENCY_LEVELS);
const override = z.strictObject({ read: consistency.optional(), write: consistency.optional() });
const perTable = <T extends z.ZodType>(t: T) =>
  z.strictObject({ snapshots: t.optional(), keys: t.optional(), journals: t.optional() });

/** The zod fields of CassandraFlowOptions, spread into cassandraPersistenceSchema. */
export const cassandraFlowOptionsShape = {
  contactPoints: z.array(z.string().regex(/^\S+:\d{1,5}$/, 'host:port')).min(1).optional(),
  localDataCenter: z.string().min(1).optional(),
  keyspace: name.optional(),
  replication: z
    .record(z.string().min(1), z.union([z.string(), z.number()]))
    .refine((r) => typeof r.class === 'string', 'needs a "class" (e.g. SimpleStrategy, NetworkTopologyStrategy)')
    .optional(),
  autoCreate: z.boolean().optional(),
  applicationId: z.string().min(1).optional(),
  tables: perTable(name).optional(),
  keySegments: z.number().int().min(1).max(2_147_483_647).optional(),
  ttl: perTable(durationSchema).optional(),
  consistency: perTable(override).optional(),
  serialConsistency: z.enum(['SERIAL', 'LOCAL_SERIAL']).optional(),
  fencing: z.enum(FENCINGS).optional(),
  fenceRowTtl: durationSchema.optional(),
  fenceEpoch: z.number().int().min(0).max(2 ** 20).optional(),
  maxConcurrentReads: z.number().int().positive().optional(),
  maxConcurrentWrites: z.number().int().positive().optional(),
  keyListParallelism: z.number().int().positive().optional(),
  segmentsPerQuery: z.number().int().min(1).max(1000).optional(),
  keyScanRows: z.number().int().min(0).optional(),
  maxWritesPerBatch: z.number().int().positive().optional(),
  recoveryBatchSize: z.number().int().min(1).max(1000).optional(),
  layout: z.enum(SNAPSHOT_LAYOUTS).optional(),
  buckets: z.number().int().min(1).max(MAX_BUCKETS).optional(),
};

export const cassandraFlowOptionsSchema = z.strictObject(cassandraFlowOptionsShape);

/** Cassandra tables in kafka-flow's shape; every option is described in docs/cassandra.md. */
export interface CassandraPersistenceOptions extends CassandraFlowOptions {
  backend: 'cassandra';
  /** Default 'snapshots'. */
  mode?: PersistenceMode;
  /** Snapshots of at least this many bytes are compressed. Default 10000. */
  compressionThreshold?: number;
  /**
   * A local state store per partition under `dir` (docs/local-state.md#cassandra-persistence): a
   * restart onto an intact store reads nothing from Cassandra. Mode 'snapshots', fencing 'lwt' or
   * 'timestamp', no snapshot TTL. Default off (`KFT_STATE_DIR` turns it on too).
   */
  localState?: { dir: string };
}

/** A flow's Cassandra persistence as `defineFlow` resolves it: the options stay as given, for the backend to resolve at start. */
export interface ResolvedCassandraPersistence {
  backend: 'cassandra';
  mode: PersistenceMode;
  compressionThreshold: number;
  options: Readonly<CassandraFlowOptions>;
  localState?: { readonly dir: string };
}

/** What `defineFlow` validates `persistence: { backend: 'cassandra', ... }` with. */
export const cassandraPersistenceSchema = z.strictObject({
  backend: z.literal('cassandra'),
  mode: z.enum(PERSISTENCE_MODES).optional(),
  compressionThreshold: z.number().int().nonnegative().optional(),
  localState: z.strictObject({ dir: z.string().min(1) }).optional(),
  ...cassandraFlowOptionsShape,
});

export function resolveCassandraPersistence(p: CassandraPersistenceOptions): ResolvedCassandraPersistence {
  const { backend, mode, compressionThreshold, localState, ...rest } = p;
  const resolvedMode = mode ?? 'snapshots';
  checkLayout(rest, resolvedMode);
  const resolved = { backend, mode: resolvedMode, compressionThreshold: compressionThreshold ?? 10_000, options: rest };
  if (!localState) return resolved;
  const refused = localStateRefusal(resolved);
  if (refused) throw new ConfigError(`persistence.localState: ${refused}`);
  return { ...resolved, localState: { dir: localState.dir } };
}

/**
 * Why Cassandra persistence cannot keep local state, if it cannot: the store mirrors snapshots
 * only; a replay after a restore from it must overwrite rows an older owner left ahead of the
 * commit, which only a generation fence orders; and rows Cassandra expires would live on in it.
 */
export function localStateRefusal(p: Pick<ResolvedCassandraPersistence, 'mode' | 'options'>): string | undefined {
  if (p.mode !== 'snapshots') return `local state keeps snapshots: mode '${p.mode}' is not 'snapshots'`;
  if ((p.options.fencing ?? 'lwt') === 'none') return "local state needs a generation fence: fencing 'lwt' or 'timestamp', not 'none'";
  const ttl = p.options.ttl?.snapshots;
  if (ttl !== undefined && toMillis(ttl, 'persistence.ttl.snapshots') > 0) return 'local state cannot follow a snapshot TTL (expired rows would live on in the local store)';
  return undefined;
}

/** The layout options that cannot go together (ConfigError): buckets without the by-partition layout, the layout without snapshots. */
export function checkLayout(options: Pick<CassandraFlowOptions, 'layout' | 'buckets' | 'fencing'>, mode: PersistenceMode): void {
  const layout = options.layout ?? 'kafka-flow';
  if (options.fencing === 'timestamp' && mode !== 'snapshots' && mode !== 'none') {
    throw new ConfigError(
      `persistence.fencing 'timestamp' guards snapshot writes only; mode '${mode}' also writes journals: use fencing 'lwt' (or mode 'snapshots')`,
    );
  }
  if (options.buckets !== undefined && layout !== 'by-partition') {
    throw new ConfigError(
      `persistence.buckets (${options.buckets}) applies to layout 'by-partition' only; this flow uses layout '${layout}' (set layout: 'by-partition', or drop buckets)`,
    );
  }
  if (layout === 'by-partition' && mode === 'journal') {
    throw new ConfigError(`persistence.layout 'by-partition' lays out the snapshots table, and mode 'journal' has none: use mode 'journal+snapshots', or drop layout`);
  }
}

/** CassandraFlowOptions with every default filled in and durations as TTL seconds (0: none). */
export interface ResolvedCassandraOptions {
  contactPoints: string[] | undefined;
  localDataCenter: string;
  keyspace: string;
  replication: Record<string, string | number>;
  autoCreate: boolean;
  applicationId: string;
  tables: Record<TableRole, string>;
  keySegments: number;
  ttlSeconds: Record<TableRole, number>;
  consistency: Record<TableRole, Required<ConsistencyOverride>>;
  serialConsistency: SerialConsistencyName;
  fencing: Fencing;
  fenceRowTtlSeconds: number;
  fenceEpoch: number;
  maxConcurrentReads: number;
  maxConcurrentWrites: number;
  keyListParallelism: number;
  segmentsPerQuery: number;
  keyScanRows: number;
  maxWritesPerBatch: number;
  recoveryBatchSize: number;
  layout: SnapshotLayout;
  /** The by-partition layout's buckets; 0 with layout 'kafka-flow'. */
  buckets: number;
}

/** Validates and resolves; throws ConfigError naming the option. `applicationId` falls back to `defaultApplicationId`. */
export function resolveCassandraOptions(options: CassandraFlowOptions, defaultApplicationId: string): ResolvedCassandraOptions {
  const parsed = cassandraFlowOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid Cassandra persistence options: ${problems}`, { cause: parsed.error });
  }
  const o = parsed.data;
  const layout = o.layout ?? 'kafka-flow';
  if (o.fencing === 'timestamp' && (o.fenceEpoch ?? 0) > MAX_TIMESTAMP_FENCE_EPOCH) {
    throw new ConfigError(`invalid Cassandra persistence options: fenceEpoch: at most ${MAX_TIMESTAMP_FENCE_EPOCH} with fencing 'timestamp'; got ${o.fenceEpoch}`);
  }
  checkLayout(o, 'snapshots');
  const tables = { ...DEFAULT_TABLES, ...(layout === 'by-partition' ? { snapshots: DEFAULT_BY_PARTITION_TABLE } : {}), ...o.tables };
  const distinct = new Set(Object.values(tables));
  if (distinct.size !== 3) throw new ConfigError(`Cassandra tables must have three different names; got ${JSON.stringify(tables)}`);
  const ttl = (role: TableRole) => ttlSeconds(o.ttl?.[role] ?? 0, `persistence.ttl.${role}`);
  const level = (role: TableRole, kind: 'read' | 'write') => o.consistency?.[role]?.[kind] ?? DEFAULT_CONSISTENCY;
  const applicationId = o.applicationId ?? defaultApplicationId;
  if (!applicationId) throw new ConfigError('Cassandra persistence needs an applicationId');
  return {
    contactPoints: o.contactPoints,
    localDataCenter: o.localDataCenter ?? 'datacenter1',
    keyspace: o.keyspace ?? DEFAULT_KEYSPACE,
    replication: o.replication ?? { ...DEFAULT_REPLICATION },
    autoCreate: o.autoCreate ?? true,
    applicationId,
    tables,
    keySegments: o.keySegments ?? DEFAULT_KEY_SEGMENTS,
    ttlSeconds: { snapshots: ttl('snapshots'), keys: ttl('keys'), journals: ttl('journals') },
    consistency: {
      snapshots: { read: level('snapshots', 'read'), write: level('snapshots', 'write') },
      keys: { read: level('keys', 'read'), write: level('keys', 'write') },
      journals: { read: level('journals', 'read'), write: level('journals', 'write') },
    },
    serialConsistency: o.serialConsistency ?? 'SERIAL',
    fencing: o.fencing ?? 'lwt',
    fenceRowTtlSeconds: ttlSeconds(o.fenceRowTtl ?? DEFAULT_FENCE_ROW_TTL_MS, 'persistence.fenceRowTtl'),
    fenceEpoch: o.fenceEpoch ?? 0,
    maxConcurrentReads: o.maxConcurrentReads ?? 64,
    maxConcurrentWrites: o.maxConcurrentWrites ?? 64,
    keyListParallelism: o.keyListParallelism ?? 32,
    segmentsPerQuery: o.segmentsPerQuery ?? 100,
    keyScanRows: o.keyScanRows ?? KEY_SCAN_ROWS,
    maxWritesPerBatch: o.maxWritesPerBatch ?? 1000,
    recoveryBatchSize: o.recoveryBatchSize ?? 100,
    layout,
    buckets: layout === 'by-partition' ? (o.buckets ?? DEFAULT_BUCKETS) : 0,
  };
}

/** A duration as Cassandra TTL seconds (rounded up; 0 means no TTL). */
export function ttlSeconds(value: Duration, what: string): number {
  const ms = toMillis(value, what);
  const seconds = Math.ceil(ms / 1000);
  if (seconds > MAX_TTL_SECONDS) {
    throw new ConfigError(`${what} is ${seconds} s; Cassandra's TTL is at most ${MAX_TTL_SECONDS} s (20 years)`);
  }
  return seconds;
}
