/**
 * The kafkajs protocol pieces our protocol modules build on, typed narrowly: its Encoder and
 * Decoder, its Long, its compression codecs, the response parsers whose error mapping we keep, and
 * the patch's registry of our extensions (`src/protocol/extensions.js`). Like kafka/internals.ts,
 * this is the pinned, patched kafkajs 2.2.4 surface, not its public API.
 */
import { createRequire } from 'node:module';

const requireKafkajs = createRequire(require.resolve('kafkajs'));

/** What kafkajs's `Long.fromValue` takes: a number, a decimal string, a bigint or a kafkajs Long. */
export type Int64 = number | string | bigint | { value: bigint };

/** kafkajs's growable byte writer (`src/protocol/encoder.js`); `buf[0, offset)` are the bytes written. */
export interface KafkajsEncoder {
  buf: Buffer;
  offset: number;
  /** A view of the bytes written. */
  readonly buffer: Buffer;
  writeInt8(value: number): this;
  writeInt16(value: number): this;
  writeInt32(value: number): this;
  writeInt64(value: Int64): this;
  writeUVarInt(value: number): this;
  writeVarInt(value: number): this;
  /** Any value `Long.fromValue` takes; a number that is not one gives what kafkajs gives. */
  writeVarLong(value: unknown): this;
  /** COMPACT_(NULLABLE_)STRING: the UTF-8 length + 1 as an unsigned varint (0: null), then the bytes. */
  writeUVarIntString(value: string | null): this;
  /** A record header key: the UTF-8 length as a zigzag varint (-1: null), then the bytes. */
  writeVarIntString(value: unknown): this;
  /** A record key or value: a Buffer's bytes, or any other value's `String()` in UTF-8; null/undefined as -1. */
  writeVarIntBytes(value: unknown): this;
  /** COMPACT_ARRAY of encoded elements: their count + 1, then their bytes. */
  writeUVarIntArray(elements: KafkajsEncoder[]): this;
}

interface EncoderClass {
  new (initialSize?: number): KafkajsEncoder;
  sizeOfVarInt(value: number): number;
  sizeOfVarLong(value: unknown): number;
  sizeOfVarIntBytes(value: unknown): number;
}

/** kafkajs's byte reader (`src/protocol/decoder.js`). */
export interface KafkajsDecoder {
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  /** COMPACT_NULLABLE_STRING. */
  readUVarIntString(): string | null;
  /** COMPACT_NULLABLE_ARRAY: null for a null array. */
  readUVarIntArray<T>(read: (decoder: KafkajsDecoder) => T): T[] | null;
  readInt8(): number;
  readUVarInt(): number;
  /** Reads a tag buffer: each tagged field's bytes by tag, or null when it is empty (the patch reads each field's size as a plain byte count). */
  readTaggedFields(): Record<number, Buffer> | null;
}

export const Encoder = requireKafkajs('./src/protocol/encoder') as EncoderClass;
export const Decoder = requireKafkajs('./src/protocol/decoder') as new (buffer: Buffer) => KafkajsDecoder;

/** An encoder over `bytes`, as kafkajs hands encoded bytes around (no copy). */
export function encoderHolding(bytes: Buffer): KafkajsEncoder {
  const encoder = new Encoder(0);
  encoder.buf = bytes;
  encoder.offset = bytes.length;
  return encoder;
}

const Long = requireKafkajs('./src/utils/long') as { fromValue(value: unknown): { getHighBits(): number; getLowBits(): number } };

/** The two 32-bit halves of an INT64 field, as kafkajs's `writeInt64` computes them (and throws). */
export function int64Halves(value: unknown): { high: number; low: number } {
  const long = Long.fromValue(value);
  return { high: long.getHighBits(), low: long.getLowBits() };
}

/** A compression codec (GZIP, or one a plugin registered): compresses the records an Encoder holds. */
export interface KafkajsCodec {
  compress(records: KafkajsEncoder): Promise<unknown>;
}

const compression = requireKafkajs('./src/protocol/message/compression') as {
  lookupCodec(type: number): KafkajsCodec | null;
  COMPRESSION_CODEC_MASK: number;
};
/** The codec of a compression type; throws kafkajs's KafkaJSNotImplemented for one it lacks. */
export const lookupCodec = compression.lookupCodec;
export const COMPRESSION_CODEC_MASK = compression.COMPRESSION_CODEC_MASK;

export const API_KEYS = requireKafkajs('./src/protocol/requests/apiKeys') as Record<
  'ApiVersions' | 'EndTxn' | 'OffsetFetch' | 'Produce' | 'TxnOffsetCommit',
  number
>;

/** A request as kafkajs's connection sends it: `encode` gives the body after the request header. */
export interface KafkajsRequest {
  apiKey: number;
  apiVersion: number;
  apiName: string;
  /** false: sent without waiting for an answer (Produce with acks 0); absent: an answer is expected. */
  expectResponse?(): boolean;
  encode(): Promise<KafkajsEncoder>;
}

/** A response as kafkajs's connection reads it: `parse` raises the response's protocol errors. */
export interface KafkajsResponse<T> {
  decode(raw: Buffer): Promise<T>;
  parse(decoded: T): Promise<T>;
}

/** One version of an API, as kafkajs's request lookup returns it for the arguments of a call. */
export interface KafkajsProtocol<T> {
  request: KafkajsRequest;
  response: KafkajsResponse<T>;
}

type Parse = <T>(decoded: T) => Promise<T>;
/** TxnOffsetCommit's: the first partition error, as kafkajs's error. */
export const parseTxnOffsetCommit = (requireKafkajs('./src/protocol/requests/txnOffsetCommit/v0/response') as { parse: Parse }).parse;
/** OffsetFetch's (v2+): the top-level error, else the first partition error, as kafkajs's error. */
export const parseOffsetFetch = (requireKafkajs('./src/protocol/requests/offsetFetch/v2/response') as { parse: Parse }).parse;

/** ApiVersions' (v0+): the top-level error as kafkajs's error. */
export const parseApiVersions = (requireKafkajs('./src/protocol/requests/apiVersions/v0/response') as { parse: Parse }).parse;
/** EndTxn's (v0+): the error as kafkajs's error. */
export const parseEndTxn = (requireKafkajs('./src/protocol/requests/endTxn/v0/response') as { parse: Parse }).parse;
/** Produce's (v3+): the first partition error as kafkajs's error (retriable ones retried by its producer). */
export const parseProduce = (requireKafkajs('./src/protocol/requests/produce/v3/response') as { parse: Parse }).parse;
/** Throws kafkajs's UNSUPPORTED_VERSION error for that code (how kafkajs learns to try an older ApiVersions). */
export const failIfVersionNotSupported = (requireKafkajs('./src/protocol/error') as { failIfVersionNotSupported(code: number): void }).failIfVersionNotSupported;

/** The patch's registry (`src/protocol/extensions.js`): the hooks kafkajs calls, by name. */
export const extensionRegistry = requireKafkajs('./src/protocol/extensions') as {
  registerExtensions(extensions: object): void;
  /** What a hook called before `registerExtensions` throws (a KafkaJSNonRetriableError). */
  KafkaJSExtensionNotRegisteredError: new (hook: string) => Error & { hook: string };
};
