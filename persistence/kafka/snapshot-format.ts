/**
 * The snapshot topic's record format. Key: the flow key (UTF-8). Value: kafka-flow's
 * `KafkaSnapshot` as JSON — `{"offset":<last folded input offset>,"metadata":"","value":<state>}` —
 * framed by the engine's Compressor (kafka-flow's byte format: a header, then the bytes, LZ4
 * compressed at or above the threshold). A deleted key is a tombstone (null value). Caching and
 * transactional mode write the same format, so switching modes needs no migration.
 */
import type { Codec } from '../../core/codec/codec';
import { Compressor } from '../../core/codec/compressor';
import type { DeleteMarker, Snapshot, StoredKey } from '../../core/persistence-types';

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

export function snapshotFormat<S>(options: SnapshotFormatOptions<S> = {}): SnapshotFormat<S> {
  const compressor = options.compressor ?? new Compressor();
  const codec = options.stateCodec;
  return {
    encode({ state, offset }: Snapshot<S>): Buffer {
      if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`snapshot offset ${offset} is not an offset`);
      let envelope: Buffer;
      if (!codec) {
        const text = JSON.stringify({ offset, metadata: '', value: state });
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
        envelope = Buffer.concat([Buffer.from(`{"offset":${offset},"metadata":"","value":`), bytes, Buffer.from('}')]);
      }
      return compressor.compress(envelope);
    },

    encodeMarker({ offset }: DeleteMarker): Buffer {
      if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`delete marker offset ${offset} is not an offset`);
      return compressor.compress(Buffer.from(`{"offset":${offset},"metadata":"","deleted":true}`, 'utf8'));
    },

    decode(bytes: Buffer): StoredKey<S> {
      const text = utf8.decode(compressor.decompress(bytes));
      const parsed = JSON.parse(text) as { offset?: unknown; value?: unknown; deleted?: unknown } | null;
      if (parsed === null || typeof parsed !== 'object' || (!('value' in parsed) && parsed.deleted !== true)) {
        throw new Error('not a snapshot envelope: no "value"');
      }
      const offset = typeof parsed.offset === 'string' ? Number(parsed.offset) : parsed.offset;
      if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
        throw new Error(`not a snapshot envelope: "offset" is ${JSON.stringify(parsed.offset)}`);
      }
      if (parsed.deleted === true) return { deleted: true, offset };
      const state = codec ? codec.decode(Buffer.from(JSON.stringify(parsed.value), 'utf8')) : (parsed.value as S);
      return { state, offset };
    },
  };
}
