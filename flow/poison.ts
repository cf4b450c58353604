import type { OutputRecord } from '../core/persistence-types';
import type { InputMessage, RecordHeaders } from './record';
import { unredactedMessage } from '../core/redact';

export type { OutputRecord };

/**
 * What to do with a record the flow cannot take: a value the codec cannot decode
 * (`onDecodeFailure`) or a record the fold throws on (`onFoldFailure`). `fail` stops the partition
 * (the workflow retries it from the persisted state), `skip` counts it and goes on, `dead-letter`
 * hands it to the input topic's dead-letter topic — with transactional Kafka persistence inside the
 * transaction that persists the key past it, so each poison record is dead-lettered exactly once.
 */
export type PoisonPolicy = 'fail' | 'skip' | 'dead-letter';

/** Why a record was dead-lettered. */
export type PoisonReason = 'decode' | 'fold';

/** Headers a dead letter carries besides the record's own. */
export const DEAD_LETTER_HEADERS = {
  flow: 'kafka-flow-dead-letter-flow',
  topic: 'kafka-flow-dead-letter-topic',
  partition: 'kafka-flow-dead-letter-partition',
  offset: 'kafka-flow-dead-letter-offset',
  reason: 'kafka-flow-dead-letter-reason',
  error: 'kafka-flow-dead-letter-error',
} as const;

/** `<groupId>-<flowName>-<inputTopic>-dead-letters`: one dead-letter topic per input topic. */
export function defaultDeadLetterTopic(groupId: string, flowName: string, inputTopic: string): string {
  return `${groupId}-${flowName}-${inputTopic}-dead-letters`;
}

/** Error texts are cut here: a header is no place for a whole stack or a large value. */
const MAX_ERROR_CHARS = 1000;

/** The dead letter of `message` (key, value and headers as they came), saying where from and why. */
export function deadLetter(
  message: InputMessage,
  where: { flow: string; topic: string; partition: number; deadLetterTopic: string },
  reason: PoisonReason,
  error: unknown,
): OutputRecord {
  const headers: Record<string, string | Buffer> = {};
  for (const [name, value] of Object.entries(message.headers ?? ({} as RecordHeaders))) {
    if (value === undefined) continue;
    // Kafka allows repeated headers; kafkajs sends one value per name: keep the last.
    const one = Array.isArray(value) ? value[value.length - 1] : value;
    if (one !== undefined) headers[name] = one;
  }
  // The error as it reads with logKeys (a fold's own message included): the dead letter carries the
  // record's key and value anyway, on a topic the flow's owner controls.
  const text = error instanceof Error ? `${error.name}: ${unredactedMessage(error)}` : String(error);
  headers[DEAD_LETTER_HEADERS.flow] = where.flow;
  headers[DEAD_LETTER_HEADERS.topic] = where.topic;
  headers[DEAD_LETTER_HEADERS.partition] = String(where.partition);
  headers[DEAD_LETTER_HEADERS.offset] = message.offset;
  headers[DEAD_LETTER_HEADERS.reason] = reason;
  headers[DEAD_LETTER_HEADERS.error] = text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
  return { topic: where.deadLetterTopic, key: message.key, value: message.value, headers };
}
