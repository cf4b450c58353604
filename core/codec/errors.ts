import { KafkaFlowError } from '../../config/errors';
import type { Codec } from './codec';

/** Where a record or a snapshot lives: enough to find it again with a Kafka or Cassandra tool. */
export interface Location {
  readonly topic: string;
  readonly partition: number;
  /** The record's key as text; undefined for a record without a key. */
  readonly key: string | undefined;
  /** The Kafka offset, as a string (offsets are 64-bit). */
  readonly offset: string;
}

function describe(location: Location): string {
  const key = location.key === undefined ? 'no key' : `key ${JSON.stringify(shorten(location.key))}`;
  return `topic "${location.topic}" partition ${location.partition} offset ${location.offset} (${key})`;
}

function shorten(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

function causeText(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  return String(cause);
}

/** An input record's bytes could not be decoded by the flow's codec. */
export class DecodeError extends KafkaFlowError implements Location {
  readonly topic: string;
  readonly partition: number;
  readonly key: string | undefined;
  readonly offset: string;
  override readonly cause: unknown;

  constructor(location: Location, cause: unknown) {
    super(
      'DECODE',
      `cannot decode the record at ${describe(location)}: ${causeText(cause)}. ` +
        'The bytes do not match the codec this flow was given (JSON by default): make the producer and ' +
        "the flow agree on the format, or pass a codec that reads what is on the topic; to get past this " +
        'one record, skip it by committing the offset after it.',
      { cause },
    );
    this.topic = location.topic;
    this.partition = location.partition;
    this.key = location.key;
    this.offset = location.offset;
    this.cause = cause;
  }
}

/** A stored snapshot's bytes could not be decompressed or decoded. */
export class CorruptSnapshotError extends KafkaFlowError implements Location {
  readonly topic: string;
  readonly partition: number;
  readonly key: string | undefined;
  readonly offset: string;
  override readonly cause: unknown;

  constructor(location: Location, cause: unknown) {
    super(
      'CORRUPT_SNAPSHOT',
      `the stored snapshot for ${describe(location)} cannot be read: ${causeText(cause)}. ` +
        'Either it was written with another state codec or compression setting, or the stored bytes ' +
        'are damaged: restore the codec it was written with, or delete this key\'s snapshot so its state ' +
        'is rebuilt from the input topic.',
      { cause },
    );
    this.topic = location.topic;
    this.partition = location.partition;
    this.key = location.key;
    this.offset = location.offset;
    this.cause = cause;
  }
}

/**
 * Bytes that claim to be in the compressor's format are not: a truncated header, impossible
 * lengths, an LZ4 block that does not decompress. Raised without a location; readers of
 * snapshots wrap it in a CorruptSnapshotError that says which snapshot.
 */
export class CompressionError extends KafkaFlowError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('COMPRESSION', message, options);
  }
}

/** Decodes an input record's bytes, turning any failure into a DecodeError at `location`. */
export function decodeRecord<T>(codec: Codec<T>, bytes: Buffer, location: Location): T {
  try {
    return codec.decode(bytes);
  } catch (err) {
    throw new DecodeError(location, err);
  }
}

/** Decodes a stored snapshot's bytes, turning any failure into a CorruptSnapshotError at `location`. */
export function decodeSnapshot<T>(codec: Codec<T>, bytes: Buffer, location: Location): T {
  try {
    return codec.decode(bytes);
  } catch (err) {
    throw new CorruptSnapshotError(location, err);
  }
}
