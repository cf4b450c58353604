import { KafkaFlowError } from '../config/errors';

/**
 * Offsets are numbers inside the engine, its ports, the backends and the worker's runtime: safe
 * integers ≥ 0 (Kafka's offsets are 64-bit; one past 2^53 - 1 is refused, OffsetOutOfRangeError).
 * They are strings only at the edges, and each edge converts here, once, by the function named for
 * it (docs/design.md, "Offsets are numbers inside the engine"):
 * - kafkajs: `offsetFromKafka` (a record's offset, the group's committed offset),
 *   `logEndFromKafka` (a fetch's high watermark), `offsetToKafka` (commitOffsets, sendOffsets,
 *   seek);
 * - text: `offsetText` — what other processes and people read (the workflow's reports and
 *   heartbeats, inspect's lines, log fields, error fields) and the offset of a record a journal
 *   hands back; `offsetFromRecord` — a FlowRecord's or journal event's offset (the string the fold
 *   sees) back to the number.
 * Every one gives or takes the decimal spelling kafkajs uses, so what is committed, persisted and
 * reported is the same text as before the engine kept numbers.
 */

/** An offset beyond 2^53 cannot be held in a number without losing precision. */
export class OffsetOutOfRangeError extends KafkaFlowError {
  constructor(offset: string) {
    super('OFFSET_OUT_OF_RANGE', `offset ${offset} is not an integer between 0 and 2^53 - 1; the engine keeps offsets as numbers`);
  }
}

/** kafkajs's offset (a record's, a committed offset) as the engine's number; throws OffsetOutOfRangeError past 2^53 - 1 or below 0. */
export function offsetFromKafka(offset: string): number {
  const n = Number(offset);
  if (!Number.isSafeInteger(n) || n < 0) throw new OffsetOutOfRangeError(offset);
  return n;
}

/**
 * A fetch's high watermark (the partition's log end, kafkajs's string) as a number, for comparing
 * with the engine's position and for the lag: not checked (kafkajs says -1 when it does not know,
 * and no engine offset reaches a log end past 2^53).
 */
export function logEndFromKafka(highWatermark: string): number {
  return Number(highWatermark);
}

/** The engine's offset as kafkajs takes it: commitOffsets, a transaction's sendOffsets, seek. */
export function offsetToKafka(offset: number): string {
  return String(offset);
}

/** The engine's offset as text: reports, heartbeats, inspect's lines, log and error fields, a journal's records. */
export function offsetText(offset: number): string {
  return String(offset);
}

/** A record's offset as the fold sees it (FlowRecord, a journal's event: kafkajs's decimal string) back to the engine's number. */
export function offsetFromRecord(offset: string): number {
  return Number(offset);
}
