/**
 * The stores' one door to Cassandra: every statement is prepared (the driver caches it by text),
 * runs under the table's consistency, and waits for a slot of the backend's read or write
 * limiter. Values cross here: offsets and segments as bigint columns, whatever the client's
 * Long/BigInt setting.
 */
import { type Client, errors, types } from 'cassandra-driver';
import { timedOutOnEveryHost } from './errors';
import { AdaptiveLimiter, Lanes, Limiter } from './limiter';
import type { ConsistencyLevelName, SerialConsistencyName } from './options';

export type Params = unknown[];

const LEVELS: Record<ConsistencyLevelName | SerialConsistencyName, number> = {
  ANY: types.consistencies.any,
  ONE: types.consistencies.one,
  TWO: types.consistencies.two,
  THREE: types.consistencies.three,
  QUORUM: types.consistencies.quorum,
  ALL: types.consistencies.all,
  LOCAL_QUORUM: types.consistencies.localQuorum,
  EACH_QUORUM: types.consistencies.eachQuorum,
  LOCAL_ONE: types.consistencies.localOne,
  SERIAL: types.consistencies.serial,
  LOCAL_SERIAL: types.consistencies.localSerial,
};

export function consistencyCode(level: ConsistencyLevelName | SerialConsistencyName): number {
  return LEVELS[level];
}

export interface CassandraSessionOptions {
  maxConcurrentReads: number;
  maxConcurrentWrites: number;
  serialConsistency: SerialConsistencyName;
  /** Where the client connects, for error messages. */
  contactPoints: readonly string[];
  /** Waits before each retry of a read the node failed transiently; default READ_RETRY_DELAYS_MS. */
  readRetryDelaysMs?: readonly number[];
}

/**
 * A read that failed transiently is tried again after these waits (reads are idempotent; each wait
 * drawn between half and one and a half times its value, so that reads failed together do not
 * return together): a node that has just restarted can fail a read or two ("Server failure during
 * read" on a key listing right after a restart), and an overloaded node answers late — a recovery's
 * key listing on a loaded machine timed out read after read. One failed query of a recovery's
 * hundreds would otherwise fail the whole recovery, which then starts over with all of them.
 */
export const READ_RETRY_DELAYS_MS: readonly number[] = [100, 500, 1000, 2000, 4000, 8000];

/** Answers of a node that is up but could not serve this read now (not: no node reachable, a bad query). */
const TRANSIENT_READ_ERRORS: ReadonlySet<number> = new Set([
  types.responseErrorCodes.serverError,
  types.responseErrorCodes.unavailableException,
  types.responseErrorCodes.overloaded,
  types.responseErrorCodes.isBootstrapping,
  types.responseErrorCodes.readTimeout,
  types.responseErrorCodes.readFailure,
]);

/** Answers that say the node has more to do than it can: fewer reads at once from here on. */
const OVERLOAD_ERRORS: ReadonlySet<number> = new Set([types.responseErrorCodes.overloaded, types.responseErrorCodes.readTimeout]);

/**
 * Whether a failed read is a sign of an overloaded node: it timed out (on the node or here) or the
 * node said so. A statement not yet prepared on the client fails its preparation instead, as "no
 * host available" with a timeout from every host tried: the same sign.
 */
export function isOverloadError(err: unknown): boolean {
  if (err instanceof errors.OperationTimedOutError) return true;
  if (timedOutOnEveryHost(err)) return true;
  return err instanceof errors.ResponseError && OVERLOAD_ERRORS.has(err.code);
}

/** Whether a failed read may succeed if simply tried again shortly. */
export function isTransientReadError(err: unknown): boolean {
  return isOverloadError(err) || (err instanceof errors.ResponseError && TRANSIENT_READ_ERRORS.has(err.code));
}

export class CassandraSession {
  /** Reads at once: at most `maxConcurrentReads`, fewer while the node shows overload. */
  readonly reads: AdaptiveLimiter;
  readonly writes: Limiter;
  /**
   * Lightweight transactions of one Cassandra partition contend for its Paxos state: a process
   * runs them one at a time per partition (see paxosLane), so its own never make each other retry.
   */
  private readonly paxos = new Lanes();
  readonly serialConsistency: number;
  readonly contactPoints: readonly string[];
  private readonly readRetryDelaysMs: readonly number[];

  constructor(
    readonly client: Client,
    options: CassandraSessionOptions,
  ) {
    this.reads = new AdaptiveLimiter(options.maxConcurrentReads);
    this.writes = new Limiter(options.maxConcurrentWrites);
    this.serialConsistency = consistencyCode(options.serialConsistency);
    this.contactPoints = options.contactPoints;
    this.readRetryDelaysMs = options.readRetryDelaysMs ?? READ_RETRY_DELAYS_MS;
  }

  /**
   * One read (a page of it). A transient failure is tried again (READ_RETRY_DELAYS_MS); one that
   * shows the node overloaded also lowers how many reads run at once (AdaptiveLimiter).
   */
  async read(query: string, params: Params, consistency: ConsistencyLevelName, fetchSize?: number, pageState?: string): Promise<types.ResultSet> {
    const once = () =>
      this.reads.run(() =>
        this.client.execute(query, params, {
          prepare: true,
          consistency: LEVELS[consistency],
          fetchSize,
          pageState,
        }),
      );
    for (let attempt = 0; ; attempt++) {
      try {
        const rs = await once();
        this.reads.succeeded();
        return rs;
      } catch (err) {
        if (isOverloadError(err)) this.reads.overloaded();
        const delay = this.readRetryDelaysMs[attempt];
        if (delay === undefined || !isTransientReadError(err)) throw err;
        await new Promise((resolve) => setTimeout(resolve, delay * (0.5 + Math.random())));
      }
    }
  }

  /** One read at the serial consistency: it sees every lightweight transaction accepted so far. */
  readSerial(query: string, params: Params): Promise<types.ResultSet> {
    return this.reads.run(() => this.client.execute(query, params, { prepare: true, consistency: this.serialConsistency }));
  }

  /**
   * `task` (lightweight transactions or serial reads of the Cassandra partition `lane` names) once
   * the process's previous ones on that partition settled. Contending LWTs of one partition lose
   * Paxos rounds to each other and retry until Cassandra's contention timeout: a batch of many
   * keys in few by-partition buckets failed that way on a node that syncs its commit log.
   */
  paxosLane<T>(lane: string, task: () => Promise<T>): Promise<T> {
    return this.paxos.run(lane, task);
  }

  write(query: string, params: Params, consistency: ConsistencyLevelName): Promise<types.ResultSet> {
    return this.writes.run(() =>
      this.client.execute(query, params, {
        prepare: true,
        consistency: LEVELS[consistency],
        serialConsistency: this.serialConsistency,
      }),
    );
  }

  /** Statements of one Cassandra partition as one batch (a conditional batch when one has IF). */
  writeBatch(queries: Array<{ query: string; params: Params }>, consistency: ConsistencyLevelName): Promise<types.ResultSet> {
    return this.writes.run(() =>
      this.client.batch(queries, {
        prepare: true,
        consistency: LEVELS[consistency],
        serialConsistency: this.serialConsistency,
      }),
    );
  }

  /** Every row of a query, page by page (each page a read slot), bounded by the query itself. */
  async *rows(query: string, params: Params, consistency: ConsistencyLevelName, fetchSize = 5000): AsyncGenerator<types.Row> {
    let pageState: string | undefined;
    do {
      const rs = await this.read(query, params, consistency, fetchSize, pageState);
      yield* rs.rows;
      pageState = rs.pageState ?? undefined;
    } while (pageState);
  }
}

/** A bigint column's value for the driver. */
export function long(n: number): types.Long {
  return types.Long.fromNumber(n);
}

/** A 64-bit value past a double's exact range (a fence timestamp) as a bigint parameter. */
export function longOf(n: bigint): types.Long {
  return types.Long.fromString(n.toString());
}

/** A bigint column's value as a number, whether the client hands out Long, bigint or number. */
export function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof types.Long) return value.toNumber();
  if (value && typeof (value as { toNumber?: unknown }).toNumber === 'function') return (value as { toNumber(): number }).toNumber();
  throw new TypeError(`not a bigint column value: ${String(value)}`);
}

/** A nullable bigint column's value. */
export function toNumberOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : toNumber(value);
}

/** Today (UTC) as a CQL date, as kafka-flow's `created_date`. */
export function utcDate(at: Date): types.LocalDate {
  return new types.LocalDate(at.getUTCFullYear(), at.getUTCMonth() + 1, at.getUTCDate());
}

/** Whether a result row has a column (a refused LWT answers with the row's columns only if it exists). */
export function hasColumn(rs: types.ResultSet, column: string): boolean {
  return rs.columns?.some((c) => c.name === column) ?? false;
}
