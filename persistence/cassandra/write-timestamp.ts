/**
 * Fencing 'timestamp': the owner's generation as the write timestamp of every cell it writes.
 *
 * Cassandra keeps, of two writes to one cell, the one with the higher write timestamp, whatever
 * the order they arrive in (a delete's tombstone shadows every cell at or below its timestamp).
 * So if each write carries
 *
 *     2⁶² + (fenceEpoch × 2²⁶ + generation) × 2³² + sequence
 *
 * — the owner's consumer generation above a sequence that grows with every batch the owner sends
 * for the partition — a stale owner's write (an older generation) can never replace or delete
 * what a newer owner wrote, even when it lands later; within one generation a later batch beats an
 * earlier one that lands late. That is the 'lwt' fence's order without a Paxos round per key:
 * plain writes, several times cheaper (bench/results/cassandra.json). The stale owner does not
 * learn of it from the write (its statement is applied, and shadowed): its offset commit, fenced
 * by the consumer group's generation, is what it fails on.
 *
 * 2⁶² puts every such timestamp above the microseconds of any real clock, so these writes also
 * win over rows written before with server or client clocks (kafka-flow's, 'lwt' or 'none'). The
 * reverse is why the choice is one-way for a table: a later 'lwt' or 'none' write would be
 * shadowed by them, so recovery under those modes refuses a partition written this way
 * (`isFenceTimestamp`).
 */
import type { types } from 'cassandra-driver';

/** Every fence timestamp is at least this: above any clock's microseconds until the year 148,000. */
export const FENCE_TIMESTAMP_BASE = 1n << 62n;
/** The largest consumer generation the order holds (2²⁶ − 1). */
export const MAX_FENCED_GENERATION = 2 ** 26 - 1;
/** The largest fenceEpoch the order holds. */
export const MAX_TIMESTAMP_FENCE_EPOCH = 15;
/** Batches one owner (generation) can write to one partition: 2³². */
export const SEQUENCES_PER_GENERATION = 2 ** 32;

/** Out of the order's range (a generation past 2²⁶ − 1, or a partition's 2³² batches in one generation). */
export class FenceTimestampRangeError extends RangeError {
  readonly code = 'FENCE_TIMESTAMP_RANGE';
}

/** The write timestamp of batch `sequence` of the owner with consumer `generation` under `epoch`. */
export function fenceTimestamp(epoch: number, generation: number, sequence: number): bigint {
  if (!(Number.isInteger(epoch) && epoch >= 0 && epoch <= MAX_TIMESTAMP_FENCE_EPOCH)) {
    throw new FenceTimestampRangeError(`fenceEpoch ${epoch} is outside 0…${MAX_TIMESTAMP_FENCE_EPOCH}, what fencing 'timestamp' orders`);
  }
  if (!(Number.isInteger(generation) && generation >= 0 && generation <= MAX_FENCED_GENERATION)) {
    throw new FenceTimestampRangeError(
      `consumer generation ${generation} is past ${MAX_FENCED_GENERATION}, the largest fencing 'timestamp' orders: recreate the consumer group ` +
        'and raise persistence.fenceEpoch by one (docs/cassandra.md)',
    );
  }
  if (!(Number.isInteger(sequence) && sequence >= 0 && sequence < SEQUENCES_PER_GENERATION)) {
    throw new FenceTimestampRangeError(
      `batch ${sequence} of one owner generation is past ${SEQUENCES_PER_GENERATION - 1}: restart the worker (a new generation starts over)`,
    );
  }
  const owner = BigInt(epoch) * BigInt(2 ** 26) + BigInt(generation);
  return FENCE_TIMESTAMP_BASE + owner * BigInt(SEQUENCES_PER_GENERATION) + BigInt(sequence);
}

/** Whether a cell's write timestamp (WRITETIME, microseconds or ours) is a fence timestamp. */
export function isFenceTimestamp(writetime: types.Long | bigint | number | null | undefined): boolean {
  if (writetime === null || writetime === undefined) return false;
  const v = typeof writetime === 'bigint' ? writetime : typeof writetime === 'number' ? BigInt(Math.trunc(writetime)) : BigInt(String(writetime));
  return v >= FENCE_TIMESTAMP_BASE;
}

/**
 * The next batch's sequence per (partition, generation), shared by every view of one store in the
 * process: a partition recovered again in the same generation goes on from where the last left.
 */
export class FenceSequences {
  private readonly next = new Map<string, { generation: number; sequence: number }>();

  /** Takes the next sequence of `partitionId` for `generation`; a newer generation starts at 0. */
  take(partitionId: string, generation: number): number {
    const current = this.next.get(partitionId);
    if (!current || current.generation < generation) {
      this.next.set(partitionId, { generation, sequence: 1 });
      return 0;
    }
    if (current.generation > generation) {
      // An older owner's view still writing: its sequence only has to stay below nothing newer.
      return current.sequence;
    }
    return current.sequence++;
  }
}
