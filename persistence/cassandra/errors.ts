import { KafkaFlowError } from '../../config/errors';
import { hiddenProperty, showKeys } from '../../core/redact';

/** The cause's first line (driver messages can carry whole inner errors); the rest stays in `cause`. */
function causeText(cause: unknown): string {
  const text = (cause instanceof Error ? cause.message : String(cause)).split('\n')[0]!.trim();
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/**
 * Whether the driver's "no host available" reports a timeout from every host it tried (how a
 * statement's preparation reports an overloaded node): a slow node, not a down one.
 */
export function timedOutOnEveryHost(cause: unknown): boolean {
  if ((cause as { name?: unknown } | null)?.name !== 'NoHostAvailableError') return false;
  const tried = Object.values(((cause as { innerErrors?: unknown }).innerErrors ?? {}) as Record<string, unknown>);
  return tried.length > 0 && tried.every((e) => (e as { name?: unknown } | null)?.name === 'OperationTimedOutError');
}

/** What the driver's error means for the caller, in words an operator acts on. */
function hint(cause: unknown, contactPoints: readonly string[], writing: boolean): string {
  const name = (cause as { name?: unknown } | null)?.name;
  const where = contactPoints.length > 0 ? ` at ${contactPoints.join(', ')}` : '';
  const allTimedOut = timedOutOnEveryHost(cause);
  if (name === 'NoHostAvailableError' && !allTimedOut) {
    return `no Cassandra node answered${where}: is it running and reachable?`;
  }
  const code = (cause as { code?: unknown } | null)?.code;
  if (allTimedOut || name === 'OperationTimedOutError' || code === 0x1100 || code === 0x1200) {
    return writing
      ? 'the request timed out, so whether these writes landed is unknown'
      : 'the request timed out: Cassandra is overloaded or unreachable';
  }
  if (code === 0x1000) return 'not enough replicas are alive for the consistency level';
  return '';
}

/**
 * A Cassandra statement of the backend failed (unreachable, timed out, rejected). Writes: no
 * offset past them was committed, so the partition stops (or, with `ignorePersistErrors`, keeps
 * holding) and nothing is lost; processing resumes once Cassandra answers again.
 */
export class CassandraPersistenceError extends KafkaFlowError {
  readonly operation: string;
  readonly table: string | undefined;
  readonly topic: string | undefined;
  readonly partition: number | undefined;
  /** The keys of the failed statements: not enumerable, so that loggers copying an error's fields do not print them. */
  declare readonly keys: readonly string[];
  override readonly cause: unknown;

  constructor(
    where: {
      operation: string;
      table?: string;
      topic?: string;
      partition?: number;
      keys?: readonly string[];
      contactPoints?: readonly string[];
      writing?: boolean;
    },
    cause: unknown,
  ) {
    const keys = where.keys ?? [];
    const scope =
      where.topic === undefined ? '' : ` for topic "${where.topic}" partition ${where.partition}`;
    const keyText = keys.length === 0 ? '' : ` (${keys.length} key(s): ${showKeys(keys)})`;
    const why = hint(cause, where.contactPoints ?? [], where.writing ?? false);
    super(
      'CASSANDRA',
      `${where.operation}${where.table ? ` on table ${where.table}` : ''}${scope}${keyText} failed: ${causeText(cause)}` +
        (why ? ` — ${why}` : '') +
        (where.writing
          ? '. No input offset past these writes was committed; they are written again once Cassandra answers.'
          : '.'),
      { cause },
    );
    this.operation = where.operation;
    this.table = where.table;
    this.topic = where.topic;
    this.partition = where.partition;
    hiddenProperty(this, 'keys', keys);
    this.cause = cause;
  }
}

/** Why a fenced write was refused without a newer owner (see CassandraWriteRefusedError). */
export type UnsettledReason =
  /** The store holds this generation's (or, without generations, any) write at a newer offset. */
  | 'offset'
  /** A put found a delete marker at its own offset: the row cannot be both. */
  | 'marker'
  /** The row kept changing under the write for MAX_ROUNDS statements. */
  | 'contended';

/**
 * Fenced ('lwt') writes the store refused although no newer generation wrote: the partition's
 * own earlier write landed after all (a statement that timed out and whose round completed
 * later), a write raced another of this owner's, a put met a delete marker at its own offset, or
 * the row kept changing under the write. Not a fence: no newer owner exists, so the partition
 * must not wait for one. Nothing past these writes was committed; the partition fails like any
 * failed persist and recovers on its owner from what landed.
 */
export class CassandraWriteRefusedError extends KafkaFlowError {
  readonly table: string;
  readonly topic: string;
  readonly partition: number;
  /** What each refused write met, in the order of `keys`. */
  readonly reasons: readonly UnsettledReason[];
  /** The refused keys: not enumerable, so that loggers copying an error's fields do not print them. */
  declare readonly keys: readonly string[];

  constructor(where: { table: string; topic: string; partition: number }, refused: ReadonlyArray<{ key: string; by: UnsettledReason; reason: string }>) {
    const keys = refused.map((r) => r.key);
    const first = refused[0];
    super(
      'CASSANDRA_WRITE_REFUSED',
      `${refused.length} fenced write(s) on table ${where.table} for topic "${where.topic}" partition ${where.partition} ` +
        `(key(s): ${showKeys(keys)}) were refused although no newer owner wrote` +
        (first ? ` (${first.by}: ${first.reason})` : '') +
        '. Not a fence: no input offset past these writes was committed, and the partition recovers on its owner from what landed.',
    );
    this.table = where.table;
    this.topic = where.topic;
    this.partition = where.partition;
    this.reasons = refused.map((r) => r.by);
    hiddenProperty(this, 'keys', keys);
  }
}

/** The keyspace or a table is missing (and autoCreate is off) or does not have the columns the backend needs. */
export class CassandraSchemaError extends KafkaFlowError {
  readonly table: string | undefined;
  constructor(message: string, table?: string, options?: { cause?: unknown }) {
    super('CASSANDRA_SCHEMA', message, options);
    this.table = table;
  }
}

/**
 * A by-partition snapshots table was made with another bucket count than the backend's `buckets`
 * (recorded in the table's comment). Reading with another count would look for keys in buckets
 * they are not in, so the backend refuses to start rather than mis-read.
 */
export class CassandraBucketMismatchError extends KafkaFlowError {
  readonly table: string;
  readonly tableBuckets: number;
  readonly configuredBuckets: number;
  constructor(table: string, tableBuckets: number, configuredBuckets: number) {
    super(
      'CASSANDRA_BUCKETS',
      `table ${table} lays out snapshots in ${tableBuckets} buckets per Kafka partition, but this flow is configured with buckets: ${configuredBuckets}. ` +
        `The bucket count is fixed for a table: set buckets: ${tableBuckets}, or point tables.snapshots at a new table and migrate into it (docs/cassandra.md, "Migrating")`,
    );
    this.table = table;
    this.tableBuckets = tableBuckets;
    this.configuredBuckets = configuredBuckets;
  }
}

/**
 * A partition's snapshots were written with fencing 'timestamp' (write timestamps above any clock)
 * but the flow now runs 'lwt' or 'none': its writes would carry clock timestamps, lower, and be
 * silently shadowed. Recovery refuses the partition instead of losing every later write.
 */
export class CassandraFencingMismatchError extends KafkaFlowError {
  readonly table: string;
  readonly topic: string;
  readonly partition: number;
  constructor(where: { table: string; topic: string; partition: number }, fencing: string) {
    super(
      'CASSANDRA_FENCING',
      `table ${where.table} holds snapshots of topic "${where.topic}" partition ${where.partition} written with fencing 'timestamp', ` +
        `but this flow runs fencing '${fencing}', whose writes they would shadow: set fencing: 'timestamp' (the choice is one-way for a table; docs/cassandra.md)`,
    );
    this.table = where.table;
    this.topic = where.topic;
    this.partition = where.partition;
  }
}
