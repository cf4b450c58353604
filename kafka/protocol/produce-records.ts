/**
 * The records of one partition's v2 record batch, sized in a first pass and written in place in a
 * second (the produce writer's two passes, `produce-writer.ts`): exactly the bytes of kafkajs
 * 2.2.4's Record and Header encoders, without an Encoder per record or header.
 *
 * Only messages of the common shape take this path: key and value a string, a Buffer, null or
 * undefined; headers undefined or an object whose values are strings, Buffers or arrays of them.
 * For any other message sizing answers -1 and the request is left to kafkajs's own encoders, so
 * those keep their exact bytes and errors.
 *
 * A message may also come encoded already (the emitted outputs of core/emitted-outputs.ts, a dead
 * letter): `encoded[encodedStart, encodedEnd)` are its key, value and headers as the v2 record
 * format writes them after the offset delta. Its length, attributes, timestamp delta and offset
 * delta are written here, then those bytes copied; its `key` and `value` are ignored.
 */
import * as varint from '../../core/varint';
import { Encoder } from './kafkajs-protocol';

// Bound here, not called through the import: the CommonJS esbuild compiles (bin/ts-loader.js) reads
// an imported function through a getter at every call, 20-25% of the cost of writing a record
// (measured).
const { sizeOfVarInt, writeVarInt } = varint;

/** A message as kafkajs's producer hands it to the Produce request: fields as the caller set them. */
export interface ProduceMessage {
  key?: unknown;
  value?: unknown;
  headers?: unknown;
  timestamp?: unknown;
  /** A Buffer holding the record's key, value and headers, encoded already, at `[encodedStart, encodedEnd)`. */
  encoded?: unknown;
  encodedStart?: number;
  encodedEnd?: number;
}

/** A delta below this in magnitude is a plain varint: zigzag-encoded, the same bytes as the varlong. */
const SMALL_DELTA = 0x40000000;

/** Node's Buffer string writers without the encoding dispatch of `write` (what `write` calls). */
interface StringWriters {
  latin1Write(text: string, at: number, length: number): number;
  utf8Write(text: string, at: number, length: number): number;
}

/**
 * Per-request scratch: the lengths the sizing pass found, read back in the same order by the
 * writing pass (per record: body size, key length, value length, header count, then per header
 * its key and value lengths; a record encoded already: its body size only), and the timestamp
 * deltas that need a varlong (by record index in the request).
 */
export class Sizes {
  private values: Int32Array;
  length = 0;
  /** Where the writing pass reads next. */
  read = 0;
  varlongs: Map<number, Buffer> | undefined;

  constructor(capacity: number) {
    this.values = new Int32Array(Math.max(capacity, 16));
  }

  push(value: number): void {
    if (this.length === this.values.length) {
      const grown = new Int32Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
  }

  set(index: number, value: number): void {
    this.values[index] = value;
  }

  next(): number {
    return this.values[this.read++]!;
  }
}

/**
 * The timestamps of one partition's record batch, as kafkajs computes them: first and max of the
 * messages' timestamps sorted as kafkajs sorts them (`Array#sort`: as strings), or now. They are
 * whatever the messages carry (numbers or strings); `any`: some message has one.
 */
export interface BatchTimes {
  dateNow: number;
  firstTimestamp: unknown;
  maxTimestamp: unknown;
  any: boolean;
}

export function batchTimestamps(messages: readonly ProduceMessage[]): BatchTimes {
  const dateNow = Date.now();
  if (!messages.some((m) => m.timestamp != null)) return { dateNow, firstTimestamp: dateNow, maxTimestamp: dateNow, any: false };
  const timestamps = messages
    .map((m) => m.timestamp)
    .filter((timestamp) => timestamp != null)
    .sort();
  return { dateNow, firstTimestamp: timestamps[0], maxTimestamp: timestamps[timestamps.length - 1], any: true };
}

/**
 * kafkajs's `(message.timestamp || dateNow) - firstTimestamp`: JavaScript's `-` on whatever the
 * timestamps are (a string coerced, NaN for text), so the bytes and errors stay kafkajs's.
 */
function timestampDelta(message: ProduceMessage, times: BatchTimes): unknown {
  return ((message.timestamp || times.dateNow) as number) - (times.firstTimestamp as number);
}

/** The byte length of a key, value or header value of the fast path; -1: null; -2: not of it. */
function lengthOf(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (value === null || value === undefined) return -1;
  if (Buffer.isBuffer(value)) return value.length;
  return -2;
}

/** Writes a string of `length` UTF-8 bytes, or a Buffer, at `offset`; returns the new offset. */
function writeValue(buf: Buffer, offset: number, value: string | Buffer, length: number): number {
  if (typeof value === 'string') {
    // All ASCII when the UTF-8 length is the UTF-16 length: latin1 writes the same bytes, faster.
    const writers = buf as unknown as StringWriters;
    if (length === value.length) writers.latin1Write(value, offset, length);
    else writers.utf8Write(value, offset, length);
  } else {
    value.copy(buf, offset);
  }
  return offset + length;
}

/** The size of a header (or record field) of `length` bytes with its varint length; -1: null. */
const sizeOfField = (length: number): number => (length < 0 ? 1 : sizeOfVarInt(length) + length);

/**
 * Sizes one partition's records into `sizes` (`recordIndexBase`: the index of its first record in
 * the request); returns their total bytes, or -1 when a message is not of the fast path's shape.
 */
export function sizeRecords(messages: readonly ProduceMessage[], times: BatchTimes, sizes: Sizes, recordIndexBase: number): number {
  let total = 0;
  let lastHeaderKey: string | undefined;
  let lastHeaderKeyLength = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    const encoded = message.encoded;
    const keyLength = encoded === undefined ? lengthOf(message.key) : 0;
    const valueLength = encoded === undefined ? lengthOf(message.value) : 0;
    if (keyLength === -2 || valueLength === -2) return -1;

    let deltaSize: number;
    if (times.any) {
      const delta = timestampDelta(message, times);
      if (typeof delta === 'number' && Number.isInteger(delta) && delta > -SMALL_DELTA && delta < SMALL_DELTA) {
        deltaSize = sizeOfVarInt(delta);
      } else {
        // Rare (timestamps 2^30 ms apart, or not numbers): kafkajs's own varlong, bytes kept.
        const varlong = new Encoder(10).writeVarLong(delta).buffer;
        if (!sizes.varlongs) sizes.varlongs = new Map();
        sizes.varlongs.set(recordIndexBase + i, varlong);
        deltaSize = varlong.length;
      }
    } else {
      deltaSize = 1; // delta 0
    }

    if (encoded !== undefined) {
      if (!Buffer.isBuffer(encoded)) return -1;
      const bodySize = 1 + deltaSize + sizeOfVarInt(i) + (message.encodedEnd! - message.encodedStart!);
      sizes.push(bodySize);
      total += sizeOfVarInt(bodySize) + bodySize;
      continue;
    }

    const bodyIndex = sizes.length;
    sizes.push(0); // the body size, set below
    sizes.push(keyLength);
    sizes.push(valueLength);
    const countIndex = sizes.length;
    sizes.push(0); // the header count, set below

    let headerCount = 0;
    let headersSize = 0;
    const headers = message.headers;
    if (headers !== undefined) {
      if (headers === null || typeof headers !== 'object') return -1;
      for (const headerKey in headers) {
        if (!Object.hasOwn(headers, headerKey)) continue;
        const headerValue = (headers as Record<string, unknown>)[headerKey];
        if (headerKey !== lastHeaderKey) {
          lastHeaderKey = headerKey;
          lastHeaderKeyLength = Buffer.byteLength(headerKey);
        }
        // An array is the header's values in order; no array made for a single value.
        const values = Array.isArray(headerValue) ? (headerValue as unknown[]) : undefined;
        const count = values ? values.length : 1;
        for (let j = 0; j < count; j++) {
          const length = lengthOf(values ? values[j] : headerValue);
          if (length < 0) return -1;
          sizes.push(lastHeaderKeyLength);
          sizes.push(length);
          headersSize += sizeOfField(lastHeaderKeyLength) + sizeOfField(length);
          headerCount++;
        }
      }
    }

    const bodySize =
      1 + // attributes
      deltaSize +
      sizeOfVarInt(i) +
      sizeOfField(keyLength) +
      sizeOfField(valueLength) +
      sizeOfVarInt(headerCount) +
      headersSize;
    sizes.set(bodyIndex, bodySize);
    sizes.set(countIndex, headerCount);
    total += sizeOfVarInt(bodySize) + bodySize;
  }
  return total;
}

/** Writes one partition's records (sized by sizeRecords, read back from `sizes`) at `offset`; returns the offset after them. */
export function writeRecords(
  buf: Buffer,
  offset: number,
  messages: readonly ProduceMessage[],
  times: BatchTimes,
  sizes: Sizes,
  recordIndexBase: number,
): number {
  let lastHeaderKey: string | undefined;
  let lastHeaderKeyOffset = -1;
  let lastHeaderKeyLength = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    offset = writeVarInt(buf, offset, sizes.next());
    buf[offset++] = 0; // attributes
    if (!times.any) {
      buf[offset++] = 0; // timestamp delta 0
    } else {
      const varlong = sizes.varlongs?.get(recordIndexBase + i);
      if (varlong) {
        varlong.copy(buf, offset);
        offset += varlong.length;
      } else {
        // sized as a small integer delta
        offset = writeVarInt(buf, offset, timestampDelta(message, times) as number);
      }
    }
    offset = writeVarInt(buf, offset, i);

    if (message.encoded !== undefined) {
      offset += (message.encoded as Buffer).copy(buf, offset, message.encodedStart, message.encodedEnd);
      continue;
    }

    // Sized by sizeRecords: a key, value or header value of length >= 0 is a string or a Buffer.
    const keyLength = sizes.next();
    offset = writeVarInt(buf, offset, keyLength);
    if (keyLength >= 0) offset = writeValue(buf, offset, message.key as string | Buffer, keyLength);
    const valueLength = sizes.next();
    offset = writeVarInt(buf, offset, valueLength);
    if (valueLength >= 0) offset = writeValue(buf, offset, message.value as string | Buffer, valueLength);

    const headerCount = sizes.next();
    offset = writeVarInt(buf, offset, headerCount);
    if (headerCount === 0) continue;
    const headers = message.headers as Record<string, string | Buffer | Array<string | Buffer>>;
    for (const headerKey in headers) {
      if (!Object.hasOwn(headers, headerKey)) continue;
      const headerValue = headers[headerKey]!;
      const values = Array.isArray(headerValue) ? headerValue : undefined;
      const count = values ? values.length : 1;
      for (let j = 0; j < count; j++) {
        const headerKeyLength = sizes.next();
        offset = writeVarInt(buf, offset, headerKeyLength);
        if (headerKey === lastHeaderKey) {
          // The same header key as the previous header (an output's source header on every
          // record): its bytes copied from where they were written.
          buf.copyWithin(offset, lastHeaderKeyOffset, lastHeaderKeyOffset + lastHeaderKeyLength);
        } else {
          writeValue(buf, offset, headerKey, headerKeyLength);
          lastHeaderKey = headerKey;
          lastHeaderKeyLength = headerKeyLength;
        }
        lastHeaderKeyOffset = offset;
        offset += headerKeyLength;
        const length = sizes.next();
        offset = writeVarInt(buf, offset, length);
        offset = writeValue(buf, offset, values ? values[j]! : (headerValue as string | Buffer), length);
      }
    }
  }
  return offset;
}
