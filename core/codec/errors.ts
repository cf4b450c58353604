import { KafkaFlowError } from '../../config/errors';
import { causeText, hiddenProperty, showKey, withheld } from '../redact';
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

/**
 * An error about one record or stored snapshot, at its Location. The key is not enumerable, so that
 * loggers copying an error's fields do not print it; the message shows it as core/redact says.
 */
abstract class LocatedError extends KafkaFlowError implements Location {
  readonly topic: string;
  readonly partition: number;
  declare readonly key: string | undefined;
  readonly offset: string;
  override readonly cause: unknown;

  /** `message` is given the location described and the cause's text. */
  protected constructor(code: string, location: Location, cause: unknown, message: (where: string, why: string) => string) {
    super(code, message(describe(location), causeText(cause)), { cause });
    this.topic = location.topic;
    this.partition = location.partition;
    hiddenProperty(this, 'key', location.key);
    this.offset = location.offset;
    this.cause = cause;
  }
}

/**
 * An input record's bytes could not be decoded by the flow's codec. Its `cause` is the codec's
 * error, or a WithheldMessageError in its place unless the flow has `logKeys` (it may quote the bytes).
 */
export class DecodeError extends LocatedError {
  constructor(location: Location, codecError: unknown) {
    super(
      'DECODE',
      location,
      withheld(codecError),
      (where, why) =>
        `cannot decode the record at ${where}: ${why}. ` +
        'The bytes do not match the codec this flow was given (JSON by default): make the producer and ' +
        "the flow agree on the format, or pass a codec that reads what is on the topic; to get past this " +
        'one record, skip it by committing the offset after it.',
    );
  }
}

/**
 * A stored snapshot's bytes could not be decompressed or decoded. Its `cause` says why; a codec's
 * error is withheld unless the flow has `logKeys` (it may quote the state).
 */
export class CorruptSnapshotError extends LocatedError {
  constructor(location: Location, error: unknown) {
    super(
      'CORRUPT_SNAPSHOT',
      location,
      withheld(error),
      (where, why) =>
        `the stored snapshot for ${where} cannot be read: ${why}. ` +
        'Either it was written with another state codec or compression setting, or the stored bytes ' +
        'are damaged: restore the codec it was written with, or delete this key\'s snapshot so its state ' +
        'is rebuilt from the input topic.',
    );
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
