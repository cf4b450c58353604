import { KafkaFlowError } from '../../config/errors';
import { hiddenProperty, showKeys } from '../../core/redact';

/** The cause's first line (driver messages can carry whole inner errors); the rest stays in `cause`. */
function causeText(cause: unknown): string {
  const text = (cause instanceof Error ? cause.message : String(cause)).split('\n')[0]!.trim();
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** What the driver's error means for the caller, in words an operator acts on. */
function hint(cause: unknown, contactPoints: readonly string[], writing: boolean): string {
  const name = (cause as { name?: unknown } | null)?.name;
  const where = contactPoints.length > 0 ? ` at ${contactPoints.join(', ')}` : '';
  if (name === 'NoHostAvailableError') {
    return `no Cassandra node answered${where}: is it running and reachable?`;
  }
  const code = (cause as { code?: unknown } | null)?.code;
  if (name === 'OperationTimedOutError' || code === 0x1100 || code === 0x1200) {
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
