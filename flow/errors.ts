import { KafkaFlowError } from '../config/errors';
import { hiddenProperty, showKey } from '../core/redact';

function causeText(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/** The user's fold threw for a record (and no `handleErrorWith` caught it). The partition stops. */
export class FoldError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** The record's key: not enumerable, so that loggers copying an error's fields do not print it. */
  declare readonly key: string;
  readonly offset: string;
  constructor(topic: string, partition: number, key: string, offset: string, cause: unknown) {
    super(
      'FOLD_FAILED',
      `the fold threw on topic "${topic}" partition ${partition} offset ${offset} (key ${showKey(key)}): ` +
        `${causeText(cause)}. The partition stops and recovers from its persisted state; fix the fold or ` +
        'wrap it with handleErrorWith to keep going.',
      { cause },
    );
    this.topic = topic;
    this.partition = partition;
    hiddenProperty(this, 'key', key);
    this.offset = offset;
  }
}

/**
 * Persisting failed and the flow does not ignore persist errors (`persistPeriodically`'s
 * `ignorePersistErrors` is false). Nothing past the failed writes was committed.
 */
export class PersistFailedError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly keys: number;
  constructor(topic: string, partition: number, keys: number, cause: unknown) {
    super(
      'PERSIST_FAILED',
      `persisting ${keys} key(s) of topic "${topic}" partition ${partition} failed: ${causeText(cause)}. ` +
        'The partition stops without committing past the unpersisted state; it recovers from what was ' +
        'persisted. Set persistPeriodically.ignorePersistErrors to log and retry instead.',
      { cause },
    );
    this.topic = topic;
    this.partition = partition;
    this.keys = keys;
  }
}

/** Committing the input offset failed (outside a transactional write). */
export class OffsetCommitFailedError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  constructor(topic: string, partition: number, offset: string, cause: unknown) {
    super(
      'COMMIT_FAILED',
      `committing offset ${offset} of topic "${topic}" partition ${partition} failed: ${causeText(cause)}. ` +
        'The state is persisted; the partition stops and the next owner replays from the last commit.',
      { cause },
    );
    this.topic = topic;
    this.partition = partition;
    this.offset = offset;
  }
}

/** A PartitionFlow was used after `recover`/`handleBatch` was called out of order. */
export class PartitionStateError extends KafkaFlowError {
  constructor(message: string) {
    super('PARTITION_STATE', message);
  }
}
