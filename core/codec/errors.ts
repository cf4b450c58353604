import { KafkaFlowError } from '../../config/errors';
import { hiddenProperty, showKey, withheld } from '../redact';
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

/** Where, with the key shown as core/redact says (a hash unless the flow has `logKeys`). */
function describe(location: Location): string {
  const key = location.key === undefined ? 'no key' : `key ${showKey(location.key)}`;
  return `topic "${location.topic}" partition ${location.partition} offset ${location.offset} (${key})`;
}

function causeText(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  return String(cause);
}

/** An input record's bytes could not be decoded by the flow's codec. */
export class DecodeError extends KafkaFlowError implements Location {
  readonly topic: string;
  readonly partition: number;
  /** The record's key: not enumerable, so that loggers copying an error's fields do not print it. */
  declare readonly key: string | undefined;
  readonly offset: string;
  /** The codec's error; a WithheldMessageError in its place unless the flow has `logKeys` (it may quote the bytes). */
  override readonly cause: unknown;

  constructor(location: Location, codecError: unknown) {
    const cause = withheld(codecError);
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
    hiddenProperty(this, 'key', location.key);
    this.offset = location.offset;
    this.cause = cause;
  }
}

/** A stored snapshot's bytes could not be decompressed or decoded. */
export class CorruptSnapshotError extends KafkaFlowError implements Location {
  readonly topic: string;
  readonly partition: number;
  /** The snapshot's key: not enumerable, so that loggers copying an error's fields do not print it. */
  declare readonly key: string | undefined;
  readonly offset: string;
  /** Why; a codec's error is withheld unless the flow has `logKeys` (it may quote the state). */
  override readonly cause: unknown;

  constructor(location: Location, error: unknown) {
    const cause = error instanceof KafkaFlowError ? error : withheld(error);
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
    hiddenProperty(this, 'key', location.key);
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
