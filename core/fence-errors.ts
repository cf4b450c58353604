import { KafkaFlowError } from '../config/errors';
import { hiddenProperty, showKeys } from '../core/redact';

/**
 * A conditional snapshot write was refused: the store already holds a newer offset for the key,
 * so another owner wrote after us. Nothing landed; the key keeps holding its old offset.
 */
export class SnapshotWriteConflictError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** The refused keys: not enumerable, so that loggers copying an error's fields do not print them. */
  declare readonly keys: readonly string[];
  constructor(topic: string, partition: number, keys: readonly string[], options?: { cause?: unknown }) {
    super(
      'SNAPSHOT_WRITE_CONFLICT',
      `the snapshot store refused ${keys.length} write(s) on topic "${topic}" partition ${partition} ` +
        `(keys ${showKeys(keys)}) because it holds newer snapshots: another ` +
        'instance owns this partition now. This instance stops the partition; the owner carries on.',
      options,
    );
    this.topic = topic;
    this.partition = partition;
    hiddenProperty(this, 'keys', keys);
  }
}

/**
 * Which fence rejected a write. `generation`: a stale consumer generation (KIP-447,
 * ILLEGAL_GENERATION); `member`: a member the group no longer knows (UNKNOWN_MEMBER_ID, evicted or
 * left); `producer-epoch`: a newer producer with the partition's transactional.id
 * (INVALID_PRODUCER_EPOCH / PRODUCER_FENCED); `not-assigned`: the live generation no longer assigns
 * this partition to us (refused before anything was sent); `store`: a backend-level fence.
 */
export type FenceReason = 'generation' | 'member' | 'producer-epoch' | 'not-assigned' | 'store';

export interface SnapshotWriteFencedOptions {
  cause?: unknown;
  /** Which fence, when the backend knows it. */
  reason?: FenceReason;
  /** The transactional.id whose write was rejected, when there is one. */
  transactionalId?: string;
}

/**
 * The writer was fenced: a newer consumer generation or producer epoch owns the partition (KIP-447),
 * or a store-level fence rejected us. Nothing from the fenced batch landed, neither writes nor the
 * offset commit; the partition must stop and leave recovery to the new owner. The one fence error
 * of the project: the Kafka port (`kafka/`) throws this class too.
 */
export class SnapshotWriteFencedError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** What happened, in words (e.g. "ILLEGAL_GENERATION on TxnOffsetCommit"). */
  readonly detail: string;
  readonly reason: FenceReason | undefined;
  readonly transactionalId: string | undefined;
  constructor(topic: string, partition: number, detail: string, options: SnapshotWriteFencedOptions = {}) {
    const by = [options.reason ? `fence: ${options.reason}` : undefined, options.transactionalId ? `transactional.id ${options.transactionalId}` : undefined]
      .filter((x) => x !== undefined)
      .join(', ');
    super(
      'FENCED',
      `writes for topic "${topic}" partition ${partition} were fenced (${detail}${by ? `; ${by}` : ''}): this instance no ` +
        'longer owns the partition. Nothing from the rejected batch landed; the new owner replays it.',
      { cause: options.cause },
    );
    this.topic = topic;
    this.partition = partition;
    this.detail = detail;
    this.reason = options.reason;
    this.transactionalId = options.transactionalId;
  }
}

/**
 * The partition's transactional producer lost its epoch (INVALID_PRODUCER_EPOCH / PRODUCER_FENCED)
 * while this process still owns the partition in the group's current generation: no newer owner
 * exists, so it is not a fence but a transaction the broker aborted (transaction.timeout.ms passed,
 * e.g. during a long pause or a broker restart) or an earlier producer of this process that
 * re-initialized the same transactional.id. Nothing of the failed transaction landed; the partition
 * re-initializes its producer and recovers from what was persisted.
 */
export class ProducerEpochLostError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  constructor(topic: string, partition: number, cause: SnapshotWriteFencedError) {
    super(
      'PRODUCER_EPOCH_LOST',
      `the snapshot producer of topic "${topic}" partition ${partition} lost its epoch (${cause.detail}) while this ` +
        'process still owns the partition: not a newer owner but an aborted transaction. Nothing of it landed; the ' +
        'partition re-initializes its producer and recovers from its persisted state.',
      { cause },
    );
    this.topic = topic;
    this.partition = partition;
  }
}

/**
 * A transaction whose commit got no answer, and whose outcome could not be learned at once, turned
 * out committed when a later write settled it. Its outputs (emitted records, dead letters) had gone
 * back to their keys meanwhile, to be written again: going on would produce them twice. Nothing of
 * the later write was sent; the partition stops — whatever `ignorePersistErrors` says — and recovers
 * from what landed: the records past the committed offset are folded again and their outputs
 * produced once.
 */
export class CommitLandedLateError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** The input offset the late transaction committed. */
  readonly offset: number;
  /** How many outputs it carried. */
  readonly outputs: number;
  constructor(topic: string, partition: number, offset: number, outputs: number) {
    super(
      'COMMIT_LANDED_LATE',
      `a snapshot transaction of topic "${topic}" partition ${partition} (offset ${offset}) whose commit got no ` +
        `answer turned out committed only when the next write settled it; its ${outputs} output(s) had gone ` +
        'back to their keys, so going on would produce them twice. The partition stops and recovers from ' +
        'what landed (its outputs are produced once).',
    );
    this.topic = topic;
    this.partition = partition;
    this.offset = offset;
    this.outputs = outputs;
  }
}
