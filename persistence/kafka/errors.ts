import { KafkaFlowError } from '../../config/errors';
import type { OpenTransaction } from '../../kafka/hanging-transactions';

/** Why a recovery read stopped making progress (see diagnoseStall). */
export type StallCause = 'truncation' | 'outlived-transaction' | 'undetermined';

/** What was seen when the recovery read's no-progress deadline passed. */
export interface StallObservation {
  /** The snapshot topic and partition being read. */
  readonly topic: string;
  readonly partition: number;
  /** Where the read is stuck (the next offset it needs). */
  readonly position: string;
  /** The bound captured before the read: the log end, read_uncommitted. */
  readonly bound: string;
  readonly stalledForMs: number;
  /** The log end re-read at the deadline (read_uncommitted); undefined if the re-read failed. */
  readonly logEnd?: string;
  /** The last stable offset re-read at the deadline (read_committed); undefined if the re-read failed. */
  readonly lastStable?: string;
  /** Why the re-read failed, if it did. */
  readonly reReadError?: unknown;
  /** The transactions open on the partition (DescribeProducers), read when the last stable offset pins the read. */
  readonly openTransactions?: readonly OpenTransaction[];
}

/**
 * A recovery read of the snapshot topic made no progress for `recoveryStallTimeout`, so recovery
 * fails loudly instead of hanging. `cause` says why (diagnosed by re-reading the log end):
 * `truncation` — the log end regressed below the captured bound: acknowledged snapshot records
 * are gone (an unclean leader election or an equivalent disaster; an offset-reset or restore
 * decision for an operator); `outlived-transaction` — the log still covers the bound and the last
 * stable offset pins the read: an open transaction outlived the deadline (one with a long
 * transaction.timeout.ms heals by itself; a hanging one needs kafka-transactions.sh, KIP-664);
 * `undetermined` — the re-read failed or explains nothing: check the brokers'
 * UncleanLeaderElectionsPerSec and PartitionsWithLateTransactionsCount.
 */
export class RecoveryReadStalledError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly position: string;
  readonly bound: string;
  readonly stalledForMs: number;
  /** The diagnosed cause (not an Error: the re-read's own failure, if any, is in `observation`). */
  override readonly cause: StallCause;
  readonly explanation: string;
  readonly observation: StallObservation;

  constructor(observation: StallObservation, cause: StallCause, explanation: string) {
    super(
      'RECOVERY_STALLED',
      `recovery read of snapshot topic "${observation.topic}" partition ${observation.partition} made no progress ` +
        `for ${Math.round(observation.stalledForMs)} ms at offset ${observation.position}, short of the bound ` +
        `${observation.bound} captured before the read: failing rather than hanging or recovering possibly ` +
        `incomplete state. Cause: ${cause}: ${explanation}`,
    );
    this.topic = observation.topic;
    this.partition = observation.partition;
    this.position = observation.position;
    this.bound = observation.bound;
    this.stalledForMs = observation.stalledForMs;
    this.cause = cause;
    this.explanation = explanation;
    this.observation = observation;
  }
}

/**
 * The snapshot topic exists but does not fit the flow: a partition count other than the input
 * topic's (snapshot partition p must hold input partition p's keys) or a cleanup policy other than
 * `compact` (a `delete` policy loses snapshots to retention).
 */
export class SnapshotTopicMismatchError extends KafkaFlowError {
  readonly exitCode = 2;
  readonly topic: string;
  constructor(topic: string, problems: readonly string[]) {
    super(
      'SNAPSHOT_TOPIC_MISMATCH',
      `snapshot topic "${topic}" does not fit this flow: ${problems.join('; ')}. Snapshot partition p holds input ` +
        'partition p\'s keys, so the counts must match, and only cleanup.policy=compact keeps every key\'s latest ' +
        'snapshot. Point the flow at another snapshotTopic, or fix the topic (kafka-configs.sh / kafka-topics.sh) ' +
        'if its contents are still right.',
    );
    this.topic = topic;
  }
}

/**
 * A transactional write had no consumer generation to commit its offset under (the consumer has
 * not joined, or the generation is unknown). Committing with none would skip the broker's
 * generation check and land unfenced, so the write fails instead.
 */
export class MissingGenerationError extends KafkaFlowError {
  constructor(topic: string, partition: number) {
    super(
      'NO_GENERATION',
      `cannot commit the offset of topic "${topic}" partition ${partition} transactionally: no consumer generation ` +
        'is known (the consumer has not joined its group). Transactional snapshot writes need the flow\'s own ' +
        'group member; nothing was written.',
    );
  }
}
