/**
 * Kafka errors as the project sees them. A fence means "someone newer owns this partition (or
 * this transactional id)": the write must not land, the producer is spent, nothing is retried.
 */
import { KafkaFlowError } from '../config/errors';
import { type FenceReason, SnapshotWriteFencedError } from '../core/fence-errors';

// The project has one fence error, defined with the persistence port; re-exported for convenience.
export { type FenceReason, SnapshotWriteFencedError };

/** kafkajs error types that are fences, by the reason we report. */
const FENCE_TYPES: Record<string, FenceReason> = {
  ILLEGAL_GENERATION: 'generation', // 22: a stale consumer generation (KIP-447, TxnOffsetCommit v3)
  UNKNOWN_MEMBER_ID: 'member', // 25: a member the group no longer knows (evicted, left)
  INVALID_PRODUCER_EPOCH: 'producer-epoch', // 47: a newer producer with this transactional.id (or the transaction timed out)
  PRODUCER_FENCED: 'producer-epoch', // 90: the same, from brokers that distinguish it
};
const FENCE_CODES: Record<number, FenceReason> = {
  22: 'generation',
  25: 'member',
  47: 'producer-epoch',
  90: 'producer-epoch',
};

/**
 * A transaction commit got no answer: none within the commit timeout, or the request failed in a
 * way that leaves its outcome unknown (the connection closed or the request timed out after EndTxn
 * went out — the broker may have committed). The broker may have committed it or not (the
 * snapshots, the outputs and the offset share the outcome); the producer was torn down, and the
 * next producer's initialization settles the transaction.
 */
export class SnapshotCommitTimeoutError extends KafkaFlowError {
  readonly transactionalId: string;
  /** Where the transaction's records went (first offset per partition), to learn its outcome later. */
  readonly sent: readonly SentRecords[];
  /** The commit timeout that ran out; undefined when the request itself failed (see `cause`). */
  readonly timeoutMs: number | undefined;
  constructor(transactionalId: string, timeoutMs: number | undefined, options: { cause?: unknown; sent?: readonly SentRecords[] } = {}) {
    const how = timeoutMs !== undefined ? `within ${timeoutMs} ms` : `(${describeCause(options.cause)})`;
    super(
      'COMMIT_TIMEOUT',
      `commit of ${transactionalId} got no answer ${how}; outcome unknown ` +
        '(snapshots, outputs and offset commit together or not at all); the producer was rebuilt',
      { cause: options.cause },
    );
    this.transactionalId = transactionalId;
    this.sent = options.sent ?? [];
    this.timeoutMs = timeoutMs;
  }
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) return `${cause.name}: ${cause.message}`;
  return cause === undefined ? 'no cause given' : String(cause);
}

/**
 * What a failed EndTxn(commit) says about its transaction. `refused`: a fence — the coordinator
 * answered that a newer producer epoch exists, which aborted the transaction: nothing landed.
 * `unknown`: anything else. The connection closed or the request timed out after it went out (the
 * coordinator may have committed); an error answer may follow a PrepareCommit the coordinator did
 * write (COORDINATOR_NOT_AVAILABLE when its log append timed out); and a failure before the request
 * went out costs no more than learning that nothing landed.
 */
export function commitFailureOutcome(err: unknown): 'refused' | 'unknown' {
  return fenceReason(err) !== undefined ? 'refused' : 'unknown';
}

/** The first offset the broker assigned to a transaction's records on one partition. */
export interface SentRecords {
  topic: string;
  partition: number;
  baseOffset: string;
  count: number;
}

/** A group-less partition read made no progress for its deadline. */
export class PartitionReadStalledError extends KafkaFlowError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly position: string,
    readonly bound: string,
    readonly stalledForMs: number,
  ) {
    super(
      'READ_STALLED',
      `read of ${topic}/${partition} made no progress for ${stalledForMs} ms at offset ${position} ` +
        `(bound ${bound}): an unfinished transaction or lost records`,
    );
  }
}

interface KafkaJsLikeError {
  type?: unknown;
  code?: unknown;
  name?: unknown;
  cause?: unknown;
  originalError?: unknown;
  errors?: unknown;
}

/** Every error in a kafkajs error's chain (retry wrappers keep the original as `cause`). */
function* chain(err: unknown, depth = 0): Generator<KafkaJsLikeError> {
  if (err == null || typeof err !== 'object' || depth > 8) return;
  const e = err as KafkaJsLikeError;
  yield e;
  if (e.cause !== err) yield* chain(e.cause, depth + 1);
  if (e.originalError !== err) yield* chain(e.originalError, depth + 1);
  if (Array.isArray(e.errors)) for (const inner of e.errors) yield* chain(inner, depth + 1);
}

/** Why `err` is a fence, or undefined if it is not one. */
export function fenceReason(err: unknown): FenceReason | undefined {
  for (const e of chain(err)) {
    if (typeof e.type === 'string' && FENCE_TYPES[e.type]) return FENCE_TYPES[e.type];
    // KafkaJSProtocolError carries the numeric code; Node socket errors carry string codes.
    if (e.name === 'KafkaJSProtocolError' && typeof e.code === 'number' && FENCE_CODES[e.code]) {
      return FENCE_CODES[e.code];
    }
  }
  return undefined;
}

/** The kafkajs protocol error type in `err`'s chain (e.g. 'UNSTABLE_OFFSET_COMMIT'), if any. */
export function protocolErrorType(err: unknown): string | undefined {
  for (const e of chain(err)) if (typeof e.type === 'string') return e.type;
  return undefined;
}
