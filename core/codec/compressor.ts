import { compressSync, uncompressSync } from 'lz4-napi';
import { ConfigError } from '../../config/errors';
import type { Codec } from './codec';
import { CompressionError } from './errors';

/**
 * State compression in kafka-flow's byte format, so that snapshots written by either side read on
 * the other:
 *
 *   [h_len: int32 BE][header: h_len bytes][payload]
 *
 * The header says whether the payload is compressed. A compressed payload is
 *
 *   [p_len: int32 BE, the uncompressed length][one raw LZ4 block]
 *
 * and an uncompressed one is the caller's bytes as they are. Bytes that start with `{` are taken to
 * be raw JSON written before compression was turned on and are returned untouched.
 */

/** kafka-flow's default: payloads of this many bytes or more are compressed. */
export const DEFAULT_COMPRESSION_THRESHOLD = 10_000;

/**
 * How the header is written. kafka-flow leaves the header's encoding to the application: its
 * Compressor documents a JSON header (`{"compressed":true}`), while its docs and tests use scodec's
 * `bool` (one byte, 0x80 or 0x00). Either is read whatever is chosen here.
 */
export type HeaderFormat = 'json' | 'bool';

/** Sizes reported on each compress: the caller's bytes, and the bytes written (header included). */
export interface CompressorMetrics {
  rawBytes(n: number): void;
  compressedBytes(n: number): void;
}

/** A prom-client Counter (or Summary) with a `component` label, or anything shaped like one. */
export type LabelledMetric =
  | { inc(labels: { component: string }, value: number): void }
  | { observe(labels: { component: string }, value: number): void };

/** Adapts two labelled metrics (e.g. `compressor_raw_bytes`, `compressor_compressed_bytes`). */
export function compressorMetrics(
  component: string,
  metrics: { raw: LabelledMetric; compressed: LabelledMetric },
): CompressorMetrics {
  const record = (metric: LabelledMetric, n: number) => {
    if ('inc' in metric) metric.inc({ component }, n);
    else metric.observe({ component }, n);
  };
  return {
    rawBytes: (n) => record(metrics.raw, n),
    compressedBytes: (n) => record(metrics.compressed, n),
  };
}

export interface CompressorOptions {
  /** Payloads of at least this many bytes are compressed (kafka-flow compares with `>=`). */
  compressionThreshold?: number;
  /** How to write the header; default 'json'. */
  headerFormat?: HeaderFormat;
  metrics?: CompressorMetrics;
}

const OPEN_BRACE = 0x7b;
const INT32_MAX = 0x7fffffff;
/** An LZ4 block cannot expand more than this: one 255 length byte per 255 bytes of output. */
const LZ4_MAX_RATIO = 256;

const JSON_HEADERS = {
  true: Buffer.from('{"compressed":true}', 'utf8'),
  false: Buffer.from('{"compressed":false}', 'utf8'),
};
const BOOL_HEADERS = { true: Buffer.from([0x80]), false: Buffer.from([0x00]) };

export class Compressor {
  readonly compressionThreshold: number;
  readonly headerFormat: HeaderFormat;
  private readonly metrics: CompressorMetrics | undefined;

  constructor(options: CompressorOptions = {}) {
    const threshold = options.compressionThreshold ?? DEFAULT_COMPRESSION_THRESHOLD;
    if (!(threshold >= 0) || !(Number.isInteger(threshold) || threshold === Number.POSITIVE_INFINITY)) {
      throw new ConfigError(
        `compressionThreshold must be a whole number of bytes, 0 or more (Infinity never compresses); got ${threshold}`,
      );
    }
    const headerFormat = options.headerFormat ?? 'json';
    if (headerFormat !== 'json' && headerFormat !== 'bool') {
      throw new ConfigError(`headerFormat must be 'json' or 'bool'; got ${String(headerFormat)}`);
    }
    this.compressionThreshold = threshold;
    this.headerFormat = headerFormat;
    this.metrics = options.metrics;
  }

  /** Frames `bytes` with a header, compressing them when they reach the threshold. */
  compress(bytes: Uint8Array): Buffer {
    const input = asBuffer(bytes);
    if (input.length > INT32_MAX) throw new CompressionError(`cannot frame ${input.length} bytes: over 2 GiB`);
    const compressed = input.length >= this.compressionThreshold;
    const headers = this.headerFormat === 'json' ? JSON_HEADERS : BOOL_HEADERS;
    const header = compressed ? headers.true : headers.false;
    const payload = compressed ? lz4CompressBlock(input) : input;
    const out = Buffer.allocUnsafe(4 + header.length + payload.length);
    out.writeInt32BE(header.length, 0);
    header.copy(out, 4);
    payload.copy(out, 4 + header.length);
    this.metrics?.rawBytes(input.length);
    this.metrics?.compressedBytes(out.length);
    return out;
  }

  /**
   * Where the caller's bytes start inside `bytes` when they are stored uncompressed — after the
   * header (a one-byte `bool` flag or `{"compressed":false}`), or 0 for bare JSON — so that they
   * can be read in place, without a copy or a view. Undefined when the payload is compressed or the
   * framing is anything else (`decompress` then says what).
   */
  uncompressedStart(bytes: Uint8Array): number | undefined {
    if (bytes.length > 0 && bytes[0] === OPEN_BRACE) return 0;
    if (bytes.length < 5 || bytes[0] !== 0 || bytes[1] !== 0 || bytes[2] !== 0) return undefined;
    const headerLength = bytes[3]!;
    if (headerLength === 1) return bytes[4] === 0x00 ? 5 : undefined;
    if (headerLength !== JSON_FALSE.length || bytes.length < 4 + headerLength) return undefined;
    for (let i = 0; i < headerLength; i++) if (bytes[4 + i] !== JSON_FALSE[i]) return undefined;
    return 4 + headerLength;
  }

  /**
   * The caller's bytes back from what `compress` (or kafka-flow's Compressor) wrote; bytes starting
   * with `{` are returned as they are. Throws a CompressionError on anything else that is not in the
   * format.
   */
  decompress(bytes: Uint8Array): Buffer {
    const input = asBuffer(bytes);
    if (input.length > 0 && input[0] === OPEN_BRACE) return input;
    if (input.length < 4) {
      throw new CompressionError(`${input.length} bytes is too short for a compressed-state header (need at least 4)`);
    }
    const headerLength = input.readInt32BE(0);
    if (headerLength <= 0 || headerLength > input.length - 4) {
      throw new CompressionError(
        `header length ${headerLength} does not fit in ${input.length} bytes: not compressed state, or truncated`,
      );
    }
    const compressed = readHeader(input.subarray(4, 4 + headerLength));
    const payload = input.subarray(4 + headerLength);
    return compressed ? lz4DecompressBlock(payload) : payload;
  }
}

/** Reads either header encoding: one byte is scodec's `bool` (top bit), anything longer is JSON. */
/** The two headers this project writes, recognised without parsing (recovery reads one per key). */
const JSON_TRUE = Buffer.from('{"compressed":true}');
const JSON_FALSE = Buffer.from('{"compressed":false}');
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

function readHeader(header: Buffer): boolean {
  if (header.length === 1) return (header[0]! & 0x80) !== 0;
  if (header.equals(JSON_FALSE)) return false;
  if (header.equals(JSON_TRUE)) return true;
  let parsed: unknown;
  try {
    parsed = JSON.parse(STRICT_UTF8.decode(header));
  } catch (err) {
    throw new CompressionError(`the compressed-state header is neither JSON nor a one-byte flag: ${hexPreview(header)}`, {
      cause: err,
    });
  }
  const flag = (parsed as { compressed?: unknown } | null)?.compressed;
  if (typeof flag !== 'boolean') {
    throw new CompressionError(`the compressed-state header has no boolean "compressed": ${hexPreview(header)}`);
  }
  return flag;
}

function hexPreview(bytes: Buffer): string {
  const shown = bytes.subarray(0, 32).toString('hex');
  return bytes.length > 32 ? `0x${shown}… (${bytes.length} bytes)` : `0x${shown}`;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * `[uncompressed length: int32 BE][raw LZ4 block]`, as lz4-java's block API is used by kafka-flow.
 * lz4-napi prefixes its block with a little-endian length: rewritten in place as big-endian.
 */
export function lz4CompressBlock(bytes: Uint8Array): Buffer {
  const input = asBuffer(bytes);
  const out = compressSync(input);
  out.writeInt32BE(input.length, 0);
  return out;
}

/** The inverse of lz4CompressBlock; throws a CompressionError when the bytes do not decompress. */
export function lz4DecompressBlock(bytes: Uint8Array): Buffer {
  const input = asBuffer(bytes);
  if (input.length < 5) {
    throw new CompressionError(`a compressed payload needs a 4-byte length and a block; got ${input.length} bytes`);
  }
  const length = input.readInt32BE(0);
  const blockLength = input.length - 4;
  if (length < 0 || length > blockLength * LZ4_MAX_RATIO) {
    throw new CompressionError(`uncompressed length ${length} is impossible for a ${blockLength}-byte LZ4 block`);
  }
  const framed = Buffer.allocUnsafe(input.length);
  input.copy(framed);
  framed.writeUInt32LE(length, 0);
  let out: Buffer;
  try {
    out = uncompressSync(framed);
  } catch (err) {
    throw new CompressionError(
      `the LZ4 block (${blockLength} bytes, ${length} declared) does not decompress: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (out.length !== length) {
    throw new CompressionError(`the LZ4 block decompressed to ${out.length} bytes, not the ${length} declared`);
  }
  return out;
}

/** `codec` with its bytes framed (and above the threshold, compressed) by `compressor`. */
export function withCompression<T>(codec: Codec<T>, compressor: Compressor): Codec<T> {
  return {
    encode: (value) => compressor.compress(codec.encode(value)),
    decode: (bytes) => codec.decode(compressor.decompress(bytes)),
  };
}
