import { KafkaFlowError } from '../config/errors';
import { causeText, hiddenProperty, keepUnredactedMessage, showKey, withheld } from '../core/redact';

/**
 * The user's fold threw for a record (and no `handleErrorWith` caught it). The partition stops.
 * The fold's error may quote the record: unless the flow has `logKeys`, its message is withheld
 * (the `cause` is a WithheldMessageError keeping its class name), as the key is hashed.
 */
export class FoldError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** The record's key: not enumerable, so that loggers copying an error's fields do not print it. */
  declare readonly key: string;
  readonly offset: string;
  constructor(topic: string, partition: number, key: string, offset: string, cause: unknown) {
    const shown = withheld(cause);
    const message = (why: string) =>
      `the fold threw on topic "${topic}" partition ${partition} offset ${offset} (key ${showKey(key)}): ` +
      `${why}. The partition stops and recovers from its persisted state; fix the fold or ` +
      'wrap it with handleErrorWith to keep going.';
    super('FOLD_FAILED', message(causeText(shown)), { cause: shown });
    this.topic = topic;
    this.partition = partition;
    hiddenProperty(this, 'key', key);
    this.offset = offset;
    keepUnredactedMessage(this, message(causeText(cause)));
  }
}

/**
 * Persisting failed and the flow does not ignore persist errors (`persistPeriodically`'s
 * `ignorePersistErrors` is false). Nothing past the failed writes was committed. A cause that may
 * quote the state (a state codec's error) is withheld unless the flow has `logKeys`; the Kafka
 * client's, Node's and this project's errors are shown.
 */
export class PersistFailedError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly keys: number;
  constructor(topic: string, partition: number, keys: number, cause: unknown) {
    const shown = withheld(cause);
    super(
      'PERSIST_FAILED',
      `persisting ${keys} key(s) of topic "${topic}" partition ${partition} failed: ${causeText(shown)}. ` +
        'The partition stops without committing past the unpersisted state; it recovers from what was ' +
        'persisted. Set persistPeriodically.ignorePersistErrors to log and retry instead.',
      { cause: shown },
    );
    this.topic = topic;
    this.partition = partition;
    this.keys = keys;
  }
}

/** Committing the input offset failed (outside a transactional write). Its cause is shown as PersistFailedError's. */
export class OffsetCommitFailedError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  constructor(topic: string, partition: number, offset: string, cause: unknown) {
    const shown = withheld(cause);
    super(
      'COMMIT_FAILED',
      `committing offset ${offset} of topic "${topic}" partition ${partition} failed: ${causeText(shown)}. ` +
        'The state is persisted; the partition stops and the next owner replays from the last commit.',
      { cause: shown },
    );
    this.topic = topic;
    this.partition = partition;
    this.offset = offset;
  }
}

/**
 * The flow's onTimer threw (or returned a Promise: it must return the new state synchronously) for
 * a key's timer: the partition stops and recovers from its persisted state, where the timer is
 * still pending, so it fires again — fix onTimer. Shows the key only with logKeys, as FoldError.
 */
export class TimerError extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  /** The key: not enumerable, so that loggers copying an error's fields do not print it. */
  declare readonly key: string;
  readonly timer: string;
  readonly at: number;
  constructor(topic: string, partition: number, key: string, timer: { name: string; at: number }, cause: unknown) {
    const shown = withheld(cause);
    const message = (why: string) =>
      `onTimer threw on topic "${topic}" partition ${partition} (key ${showKey(key)}, timer "${timer.name}" at ${timer.at}): ` +
      `${why}. The partition stops and recovers from its persisted state, where the timer is still pending.`;
    super('TIMER_FAILED', message(causeText(shown)), { cause: shown });
    this.topic = topic;
    this.partition = partition;
    hiddenProperty(this, 'key', key);
    this.timer = timer.name;
    this.at = timer.at;
    keepUnredactedMessage(this, message(causeText(cause)));
  }
}

/** A PartitionFlow was used after `recover`/`handleBatch` was called out of order. */
export class PartitionStateError extends KafkaFlowError {
  constructor(message: string) {
    super('PARTITION_STATE', message);
  }
}
