/**
 * A Fetch v11 response decoder for the group-less PartitionReader (recovery reads): the same
 * result as kafkajs's decoder for record batches of magic 2 without compression — what this
 * project's producers write — at a fraction of its cost. kafkajs builds every record's offset and
 * timestamp through `Long` strings (`fromString`, `add`, `toString`) and a `Decoder` per record;
 * here the batch header is read once and each record's fields straight from the buffer. Anything
 * else (a compressed batch, a message set before magic 2, a batch whose offsets would pass 2^53)
 * makes it answer undefined: the caller then decodes the response with kafkajs as before.
 *
 * Records keep kafkajs's shape (offset, key, value, timestamp and headers as kafkajs gives them,
 * isControlRecord, the batch context its patched aborted-transaction filter reads).
 */
import type { FetchPartitionData, RawMessage } from './internals';

export interface DecodedFetch {
  throttleTime: number;
  clientSideThrottleTime: number;
  errorCode: number;
  sessionId: number;
  responses: Array<{ topicName: string; partitions: Array<FetchPartitionData & { lastStartOffset: string; preferredReadReplica: number }> }>;
}

/** Bytes of a record batch's header (baseOffset … recordCount). */
const BATCH_HEADER = 61;
/** Where the magic byte is in a batch (or a legacy message). */
const MAGIC_OFFSET = 16;
const COMPRESSION_MASK = 0x07;
const TIMESTAMP_TYPE_MASK = 0x08;
const TRANSACTIONAL_MASK = 0x10;
const CONTROL_MASK = 0x20;
/** Largest base offset whose records' offsets stay exact as numbers (deltas are int32). */
const MAX_BASE = Number.MAX_SAFE_INTEGER - 2 ** 31;

class Unsupported extends Error {}

export function decodeFetchV11(raw: Buffer): DecodedFetch | undefined {
  try {
    return decode(raw);
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
}

function decode(buf: Buffer): DecodedFetch {
  let at = 0;
  const clientSideThrottleTime = buf.readInt32BE(at);
  const errorCode = buf.readInt16BE(at + 4);
  const sessionId = buf.readInt32BE(at + 6);
  at += 10;
  const topicCount = buf.readInt32BE(at);
  at += 4;
  const responses: DecodedFetch['responses'] = [];
  for (let t = 0; t < topicCount; t++) {
    const nameLength = buf.readInt16BE(at);
    at += 2;
    const topicName = buf.toString('utf8', at, at + nameLength);
    at += nameLength;
    const partitionCount = buf.readInt32BE(at);
    at += 4;
    const partitions: DecodedFetch['responses'][number]['partitions'] = [];
    for (let p = 0; p < partitionCount; p++) {
      const partition = buf.readInt32BE(at);
      const partitionError = buf.readInt16BE(at + 4);
      const highWatermark = buf.readBigInt64BE(at + 6).toString();
      const lastStableOffset = buf.readBigInt64BE(at + 14).toString();
      const lastStartOffset = buf.readBigInt64BE(at + 22).toString();
      at += 30;
      const abortedCount = buf.readInt32BE(at);
      at += 4;
      const abortedTransactions: FetchPartitionData['abortedTransactions'] = [];
      for (let a = 0; a < abortedCount; a++) {
        abortedTransactions.push({ producerId: buf.readBigInt64BE(at).toString(), firstOffset: buf.readBigInt64BE(at + 8).toString() });
        at += 16;
      }
      const preferredReadReplica = buf.readInt32BE(at);
      const size = buf.readInt32BE(at + 4);
      at += 8;
      // kafkajs: a size ≤ 0, or more than the response holds, is no records.
      const available = size > 0 && at + size <= buf.length;
      const messages = available ? records(buf, at, at + size) : [];
      if (size > 0) at += size;
      partitions.push({
        partition,
        errorCode: partitionError,
        highWatermark,
        lastStableOffset,
        lastStartOffset,
        abortedTransactions,
        preferredReadReplica,
        messages,
      });
    }
    responses.push({ topicName, partitions });
  }
  return { throttleTime: 0, clientSideThrottleTime, errorCode, sessionId, responses };
}

/** The records of the record batches in [start, end); a partial batch at the end is left out (maxBytes cuts it). */
function records(buf: Buffer, start: number, end: number): RawMessage[] {
  if (end - start > MAGIC_OFFSET && buf.readInt8(start + MAGIC_OFFSET) !== 2) throw new Unsupported('message set before magic 2');
  const out: RawMessage[] = [];
  let at = start;
  // kafkajs tries a batch once 49 bytes are left; one that does not fit is partial either way.
  while (end - at >= BATCH_HEADER) {
    const length = buf.readInt32BE(at + 8);
    const batchEnd = at + 12 + length;
    if (batchEnd > end) break;
    if (length < BATCH_HEADER - 12) throw new Unsupported('a batch shorter than its header');
    if (buf.readInt8(at + MAGIC_OFFSET) !== 2) throw new Unsupported('a batch before magic 2');
    const attributes = buf.readInt16BE(at + 21);
    if ((attributes & COMPRESSION_MASK) !== 0) throw new Unsupported('compressed batch');
    const base = buf.readBigInt64BE(at);
    if (base < 0n || base > BigInt(MAX_BASE)) throw new Unsupported('offsets beyond 2^53');
    const baseOffset = Number(base);
    const lastOffsetDelta = buf.readInt32BE(at + 23);
    const firstTimestamp = buf.readBigInt64BE(at + 27);
    const maxTimestamp = buf.readBigInt64BE(at + 35);
    const context = {
      firstOffset: base.toString(),
      lastOffsetDelta,
      producerId: buf.readBigInt64BE(at + 43).toString(),
      inTransaction: (attributes & TRANSACTIONAL_MASK) !== 0,
    };
    const isControlRecord = (attributes & CONTROL_MASK) !== 0;
    // kafkajs: log-append time gives every record the batch's max timestamp.
    const appendTime = (attributes & TIMESTAMP_TYPE_MASK) !== 0 ? maxTimestamp.toString() : undefined;
    const first = Number(firstTimestamp);
    const exactTimestamps = Number.isSafeInteger(first) && Math.abs(first) < 2 ** 52;
    const count = buf.readInt32BE(at + 57);
    const r = new Reader(buf, at + BATCH_HEADER);
    for (let i = 0; i < count; i++) {
      const recordLength = r.varint();
      const recordEnd = r.at + recordLength;
      r.at += 1; // attributes (unused)
      const timestampDelta = r.varlong();
      const offsetDelta = r.varint();
      const key = r.bytes();
      const value = r.bytes();
      const headerCount = r.varint();
      let headers: RawMessage['headers'] = {};
      if (headerCount > 0) headers = r.headers(headerCount);
      if (r.at !== recordEnd) throw new Unsupported('a record whose fields do not end where its length says');
      out.push({
        offset: String(baseOffset + offsetDelta),
        key,
        value,
        timestamp:
          appendTime ??
          (exactTimestamps && Number.isSafeInteger(timestampDelta) ? String(first + timestampDelta) : (firstTimestamp + BigInt(timestampDelta)).toString()),
        headers,
        isControlRecord,
        batchContext: context,
      });
    }
    at = batchEnd;
  }
  return out;
}

/** Varints (zigzag) and length-prefixed bytes of the record format. */
class Reader {
  constructor(
    private readonly buf: Buffer,
    public at: number,
  ) {}

  /** A zigzag varint of up to 32 bits. */
  varint(): number {
    let value = 0;
    let shift = 0;
    let byte: number;
    do {
      if (shift > 28) throw new Unsupported('varint longer than 5 bytes');
      byte = this.buf[this.at++]!;
      value |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte & 0x80);
    return (value >>> 1) ^ -(value & 1);
  }

  /** A zigzag varlong, exact while it fits in a double's 53 bits. */
  varlong(): number {
    let value = 0;
    let factor = 1;
    let byte: number;
    let bytes = 0;
    do {
      if (++bytes > 10) throw new Unsupported('varlong longer than 10 bytes');
      byte = this.buf[this.at++]!;
      value += (byte & 0x7f) * factor;
      factor *= 128;
    } while (byte & 0x80);
    // zigzag: even → value / 2, odd → -(value + 1) / 2
    return value % 2 === 0 ? value / 2 : -(value + 1) / 2;
  }

  bytes(): Buffer | null {
    const length = this.varint();
    if (length < 0) return null;
    const out = this.buf.subarray(this.at, this.at + length);
    this.at += length;
    return out;
  }

  /** As kafkajs reduces them: a name seen twice gets an array of its values. */
  headers(count: number): RawMessage['headers'] {
    const headers: Record<string, Buffer | Buffer[] | undefined> = {};
    for (let i = 0; i < count; i++) {
      const nameLength = this.varint();
      const name = nameLength < 0 ? 'null' : this.buf.toString('utf8', this.at, this.at + nameLength);
      if (nameLength > 0) this.at += nameLength;
      const value = this.bytes() as Buffer;
      const known = headers[name];
      headers[name] = known === undefined ? value : Array.isArray(known) ? known.concat([value]) : [known, value];
    }
    return headers;
  }
}
