import { KafkaFlowError } from '../config/errors';

/** An offset beyond 2^53 cannot be held in a number without losing precision. */
export class OffsetOutOfRangeError extends KafkaFlowError {
  constructor(offset: string) {
    super('OFFSET_OUT_OF_RANGE', `offset ${offset} is not an integer between 0 and 2^53 - 1; the engine keeps offsets as numbers`);
  }
}

/** kafkajs hands offsets over as strings; the engine works on numbers (below 2^53). */
export function parseOffset(offset: string): number {
  const n = Number(offset);
  if (!Number.isSafeInteger(n) || n < 0) throw new OffsetOutOfRangeError(offset);
  return n;
}

export function formatOffset(offset: number): string {
  return String(offset);
}
