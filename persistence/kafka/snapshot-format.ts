/**
 * The snapshot topic's record format. Key: the flow key (UTF-8). Value: kafka-flow's
 * `KafkaSnapshot` as JSON — `{"offset":<last folded input offset>,"metadata":"","value":<state>}` —
 * framed by the engine's Compressor (kafka-flow's byte format: a header, then the bytes, LZ4
 * compressed at or above the threshold). A deleted key is a tombstone (null value). Caching and
 * transactional mode write the same format, so switching modes needs no migration. A key with
 * pending timers (onTimer, stateTtl) carries them before its value —
 * `{"offset":…,"metadata":"","timers":[{"name":…,"at":…,"time":…}],"value":…}` — a field readers
 * that do not know it (kafka-flow) ignore; such a record is decoded in full at recovery (peek
 * leaves it to decode), so its timers are known from the start.
 */
import type { Codec } from '../../core/codec/codec';
import { Compressor } from '../../core/codec/compressor';
import type { DeleteMarker, KeyTimer, Snapshot, StoredKey } from '../../core/persistence-types';
import { timersFromJson } from '../../core/key-timers-json';

/**
 * A deleted key's record until the committed offset passes it: `{"offset":<deleting offset>,
 * "metadata":"","deleted":true}` in the same framing (no `value`, so a reader that does not know
 * markers fails loudly instead of taking it for a state). Then it is purged with a tombstone.
 */
export interface SnapshotFormat<S> {
  encode(snapshot: Snapshot<S>): Buffer;
  encodeMarker(marker: DeleteMarker): Buffer;
  /** Throws on bytes that are neither; readers wrap it in a CorruptSnapshotError. */
  decode(bytes: Buffer): StoredKey<S>;
  /**
   * What a record is without decoding its state: a snapshot or a delete marker, and its offset —
   * read from the envelope's start when it is laid out as `encode`/`encodeMarker` write it
   * (`{"offset":<digits>,"metadata":"",` then `"value":` or `"deleted":true}`; a compressed one is
   * decompressed for it). Undefined for anything else (another writer's layout, damaged framing):
   * such a record must be decoded in full. The state itself is not checked: `decode` finds out.
   */
  peek(bytes: Buffer): PeekedRecord | undefined;
}

/** A record's kind and offset, read without decoding its state. */
export interface PeekedRecord {
  readonly deleted: boolean;
  readonly offset: number;
}

export interface SnapshotFormatOptions<S> {
  /**
   * Encodes the state inside the envelope; default JSON. Its bytes must be JSON text (they are
   * embedded as the envelope's `value`, as kafka-flow's JSON KafkaSnapshot format has it).
   */
  stateCodec?: Codec<S>;
  /** Frames and compresses the envelope; default: kafka-flow's threshold (10,000 bytes). */
  compressor?: Compressor;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

const OFFSET_PREFIX = Buffer.from('{"offset":');
const METADATA = Buffer.from(',"metadata":"",');
const VALUE = Buffer.from('"value":');
const DELETED = Buffer.from('"deleted":true}');
const ZERO = 0x30;
/** Digits of the largest safe integer (2^53 - 1): 16. */
const MAX_OFFSET_DIGITS = 16;

function startsWithAt(bytes: Uint8Array, at: number, expected: Buffer): boolean {
  if (bytes.length - at < expected.length) return false;
  // A byte loop: these are a few bytes each, where a native compare's call costs more.
  for (let i = 0; i < expected.length; i++) if (bytes[at + i] !== expected[i]) return false;
  return true;
}

/** The kind and offset of the envelope starting at `start` if it is laid out as this format writes it, else undefined. */
export function peekEnvelope(bytes: Uint8Array, start = 0): PeekedRecord | undefined {
  if (!startsWithAt(bytes, start, OFFSET_PREFIX)) return undefined;
  let at = start + OFFSET_PREFIX.length;
  let offset = 0;
  const first = at;
  for (; at < bytes.length && at - first < MAX_OFFSET_DIGITS; at++) {
    const digit = bytes[at]! - ZERO;
    if (digit < 0 || digit > 9) break;
    offset = offset * 10 + digit;
  }
  const digits = at - first;
  // JSON has no leading zeros; a 16th digit may pass 2^53 - 1.
  if (digits === 0 || (digits > 1 && bytes[first] === ZERO) || !Number.isSafeInteger(offset)) return undefined;
  if (!startsWithAt(bytes, at, METADATA)) return undefined;
  at += METADATA.length;
  if (startsWithAt(bytes, at, VALUE)) return { deleted: false, offset };
  if (startsWithAt(bytes, at, DELETED) && at + DELETED.length === bytes.length) return { deleted: true, offset };
  return undefined;
}

export function snapshotFormat<S>(options: SnapshotFormatOptions<S> = {}): SnapshotFormat<S> {
  const compressor = options.compressor ?? new Compressor();
  const codec = options.stateCodec;
  return {
    encode({ state, offset, timers }: Snapshot<S>): Buffer {
      if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`snapshot offset ${offset} is not an offset`);
      const withTimers = timers !== undefined && timers.length > 0;
      let envelope: Buffer;
      if (!codec) {
        const text = JSON.stringify(withTimers ? { offset, metadata: '', timers: timers.map(timerJson), value: state } : { offset, metadata: '', value: state });
        if (text === undefined || state === undefined) throw new TypeError('cannot encode an undefined state as JSON');
        envelope = Buffer.from(text, 'utf8');
      } else {
        const bytes = codec.encode(state);
        try {
          JSON.parse(utf8.decode(bytes));
        } catch (err) {
          throw new TypeError('the stateCodec must produce JSON text: it is embedded as the snapshot envelope\'s "value"', {
            cause: err,
          });
        }
        const head = withTimers ? `{"offset":${offset},"metadata":"","timers":${JSON.stringify(timers.map(timerJson))},"value":` : `{"offset":${offset},"metadata":"","value":`;
        envelope = Buffer.concat([Buffer.from(head), bytes, Buffer.from('}')]);
      }
      return compressor.compress(envelope);
    },

    encodeMarker({ offset }: DeleteMarker): Buffer {
      if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`delete marker offset ${offset} is not an offset`);
      return compressor.compress(Buffer.from(`{"offset":${offset},"metadata":"","deleted":true}`, 'utf8'));
    },

    decode(bytes: Buffer): StoredKey<S> {
      const text = utf8.decode(compressor.decompress(bytes));
      const parsed = JSON.parse(text) as { offset?: unknown; value?: unknown; deleted?: unknown; timers?: unknown } | null;
      if (parsed === null || typeof parsed !== 'object' || (!('value' in parsed) && parsed.deleted !== true)) {
        throw new Error('not a snapshot envelope: no "value"');
      }
      const offset = typeof parsed.offset === 'string' ? Number(parsed.offset) : parsed.offset;
      if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
        throw new Error(`not a snapshot envelope: "offset" is ${JSON.stringify(parsed.offset)}`);
      }
      if (parsed.deleted === true) return { deleted: true, offset };
      const state = codec ? codec.decode(Buffer.from(JSON.stringify(parsed.value), 'utf8')) : (parsed.value as S);
      const timers = parsed.timers === undefined ? undefined : timersFromJson(parsed.timers);
      return timers ? { state, offset, timers } : { state, offset };
    },

    peek(bytes: Buffer): PeekedRecord | undefined {
      // Uncompressed (most snapshots): read in place.
      const start = compressor.uncompressedStart(bytes);
      if (start !== undefined) return peekEnvelope(bytes, start);
      let envelope: Buffer;
      try {
        envelope = compressor.decompress(bytes);
      } catch {
        return undefined; // damaged framing: decoding it in full says how
      }
      return peekEnvelope(envelope);
    },
  };
}

/** A timer as the envelope holds it (fields in a fixed order). */
function timerJson(t: KeyTimer): KeyTimer {
  return { name: t.name, at: t.at, time: t.time };
}
