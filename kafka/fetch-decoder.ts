/**
 * A Fetch v11 response decoder for the flow's group consumer (the input) and the group-less
 * PartitionReader (recovery reads), through the kafkajs patch's opt-in `fetchResponseDecoder`
 * (docs/kafkajs-patch.md): the same result as kafkajs's decoder for record batches of magic 2 without compression — what this
 * project's producers write — at a fraction of its cost. kafkajs builds every record's offset and
 * timestamp through `Long` strings (`fromString`, `add`, `toString`) and a `Decoder` per record;
 * here the batch header is read once and each record's fields straight from the buffer. Anything
 * else (a compressed batch, a message set before magic 2, a batch whose offsets would pass 2^53)
 * makes it answer undefined: the caller then decodes the response with kafkajs as before.
 *
 * Records keep kafkajs's fields (magicByte, attributes, timestamp, offset, key, value, headers,
 * isControlRecord and the batch's context, one object per batch, which its patched
 * aborted-transaction filter reads), as FetchedRecords: `key`, `value` and `offset` are getters
 * (a view of the response, the offset's decimal string: equal to kafkajs's), and the record also
 * says where the key and value are in the response (`bytes`, `keyStart` … `valueEnd`) and its
 * offset as a number, so the engine reads keys as text and decodes values straight from the
 * response, without a view or an offset parse per record (flow/partition-flow.ts). Records
 * without headers share one frozen empty object; a run of records with the same timestamp shares
 * its string.
 * `toJSON` gives kafkajs's plain record. Each partition carries `safeIntegerOffsets` (kafkajs's
 * Batch then compares the offsets as numbers instead of through a `Long` per record).
 */
import type { FetchPartitionData, RawMessage } from './internals';

/** kafkajs's record-batch context, as each of the batch's records carries it. */
type BatchContext = RawMessage['batchContext'] & {
  firstTimestamp: string;
  partitionLeaderEpoch: number;
  isControlBatch: boolean;
  producerEpoch: number;
  firstSequence: number;
  maxTimestamp: string;
  /** kafkajs's TimestampTypes: 0 create time, 1 log-append time. */
  timestampType: 0 | 1;
  magicByte: 2;
};

/**
 * The headers of every record without any: one frozen object instead of a new `{}` per record
 * (kafkajs's), equal to it for every reader.
 */
const NO_HEADERS: RawMessage['headers'] = Object.freeze({});

export interface DecodedFetch {
  throttleTime: number;
  clientSideThrottleTime: number;
  errorCode: number;
  sessionId: number;
  responses: Array<{
    topicName: string;
    partitions: Array<FetchPartitionData & { lastStartOffset: string; preferredReadReplica: number; safeIntegerOffsets: true }>;
  }>;
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

/**
 * One record as kafkajs gives it, with its key, value and offset string made when read: `key` and
 * `value` are views of `bytes` [keyStart, keyEnd) and [valueStart, valueEnd) (an end of -1: null)
 * made at the first read and kept, `offset` the decimal string of `offsetNumber`, a new one at
 * each read — equal to kafkajs's. A fetch's records live until its last batch is folded: the flow's
 * engine reads the key's text and the value from `bytes` and takes `offsetNumber` (no views; the
 * offset string it reads dies young), flow/partition-flow.ts. Every other field is kafkajs's, as an own property
 * (`magicByte`, always 2, on the prototype).
 */
export class FetchedRecord implements RawMessage {
  attributes: number;
  timestamp: string;
  /** The offset, a safe integer ≥ 0. */
  readonly offsetNumber: number;
  headers: RawMessage['headers'];
  isControlRecord: boolean;
  batchContext: BatchContext;
  /** The fetch response the key and value are in. */
  readonly bytes: Buffer;
  readonly keyStart: number;
  /** -1: a null key. */
  readonly keyEnd: number;
  readonly valueStart: number;
  /** -1: a null value. */
  readonly valueEnd: number;
  /** The views once made: a reader of the recovery read takes each several times (null check, length, copy). */
  private keyView: Buffer | null | undefined;
  private valueView: Buffer | null | undefined;

  constructor(
    attributes: number,
    timestamp: string,
    offsetNumber: number,
    headers: RawMessage['headers'],
    isControlRecord: boolean,
    batchContext: BatchContext,
    bytes: Buffer,
    keyStart: number,
    keyEnd: number,
    valueStart: number,
    valueEnd: number,
  ) {
    this.attributes = attributes;
    this.timestamp = timestamp;
    this.offsetNumber = offsetNumber;
    this.headers = headers;
    this.isControlRecord = isControlRecord;
    this.batchContext = batchContext;
    this.bytes = bytes;
    this.keyStart = keyStart;
    this.keyEnd = keyEnd;
    this.valueStart = valueStart;
    this.valueEnd = valueEnd;
    this.keyView = undefined;
    this.valueView = undefined;
  }

  get magicByte(): 2 {
    return 2;
  }

  get offset(): string {
    return String(this.offsetNumber);
  }

  get key(): Buffer | null {
    if (this.keyView === undefined) this.keyView = this.keyEnd < 0 ? null : this.bytes.subarray(this.keyStart, this.keyEnd);
    return this.keyView;
  }

  get value(): Buffer | null {
    if (this.valueView === undefined) this.valueView = this.valueEnd < 0 ? null : this.bytes.subarray(this.valueStart, this.valueEnd);
    return this.valueView;
  }

  /** kafkajs's plain record (its fields in its order), e.g. for a log line. */
  toJSON(): RawMessage & { magicByte: 2; attributes: number; batchContext: BatchContext } {
    const { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord, batchContext } = this;
    return { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord, batchContext };
  }
}

/**
 * kafkajs's opt-in `fetchResponseDecoder` (the patch; the flow's group consumer and the recovery
 * reader set it): Fetch v11 responses decoded here, anything else by kafkajs.
 */
export function decodeFetchResponse(raw: Buffer, apiVersion: number): DecodedFetch | undefined {
  return apiVersion === 11 ? decodeFetchV11(raw) : undefined;
}

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
        // kafkajs's Batch (patched) then compares the offsets as numbers: all are below MAX_BASE + 2^31.
        safeIntegerOffsets: true,
      });
    }
    responses.push({ topicName, partitions });
  }
  return { throttleTime: 0, clientSideThrottleTime, errorCode, sessionId, responses };
}

/** The records of the record batches in [start, end); a partial batch at the end is left out (maxBytes cuts it). */
function records(buf: Buffer, start: number, end: number): FetchedRecord[] {
  if (end - start > MAGIC_OFFSET && buf.readInt8(start + MAGIC_OFFSET) !== 2) throw new Unsupported('message set before magic 2');
  const out: FetchedRecord[] = [];
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
    const isControlRecord = (attributes & CONTROL_MASK) !== 0;
    const logAppendTime = (attributes & TIMESTAMP_TYPE_MASK) !== 0;
    // kafkajs's record context, shared by the batch's records (its field order).
    const context: BatchContext = {
      firstOffset: base.toString(),
      firstTimestamp: firstTimestamp.toString(),
      partitionLeaderEpoch: buf.readInt32BE(at + 12),
      inTransaction: (attributes & TRANSACTIONAL_MASK) !== 0,
      isControlBatch: isControlRecord,
      lastOffsetDelta,
      producerId: buf.readBigInt64BE(at + 43).toString(),
      producerEpoch: buf.readInt16BE(at + 51),
      firstSequence: buf.readInt32BE(at + 53),
      maxTimestamp: maxTimestamp.toString(),
      timestampType: logAppendTime ? 1 : 0,
      magicByte: 2,
    };
    // kafkajs: log-append time gives every record the batch's max timestamp.
    const appendTime = logAppendTime ? context.maxTimestamp : undefined;
    const first = Number(firstTimestamp);
    const exactTimestamps = Number.isSafeInteger(first) && Math.abs(first) < 2 ** 52;
    const count = buf.readInt32BE(at + 57);
    const r = new Reader(buf, at + BATCH_HEADER);
    // Records produced together mostly share their timestamp: one string for a run of equal deltas.
    let lastDelta = Number.NaN;
    let lastTimestamp = '';
    for (let i = 0; i < count; i++) {
      const recordLength = r.varint();
      const recordEnd = r.at + recordLength;
      const recordAttributes = (buf[r.at]! << 24) >> 24; // an int8, unused (as in kafkajs) but part of its record
      r.at += 1;
      const timestampDelta = r.varlong();
      let timestamp: string;
      if (appendTime !== undefined) {
        timestamp = appendTime;
      } else if (timestampDelta === lastDelta) {
        timestamp = lastTimestamp;
      } else {
        timestamp =
          exactTimestamps && Number.isSafeInteger(timestampDelta) ? String(first + timestampDelta) : (firstTimestamp + BigInt(timestampDelta)).toString();
        lastDelta = timestampDelta;
        lastTimestamp = timestamp;
      }
      const offsetDelta = r.varint();
      const keyLength = r.varint();
      const keyStart = r.at;
      if (keyLength > 0) r.at += keyLength;
      const valueLength = r.varint();
      const valueStart = r.at;
      if (valueLength > 0) r.at += valueLength;
      const headerCount = r.varint();
      const headers: RawMessage['headers'] = headerCount > 0 ? r.headers(headerCount) : NO_HEADERS;
      if (r.at !== recordEnd) throw new Unsupported('a record whose fields do not end where its length says');
      // kafkajs gives the negative offset; the engine refuses it (flow/offsets.ts).
      if (baseOffset + offsetDelta < 0) throw new Unsupported('a record before offset 0');
      out.push(
        new FetchedRecord(
          recordAttributes,
          timestamp,
          baseOffset + offsetDelta,
          headers,
          isControlRecord,
          context,
          buf,
          keyStart,
          keyLength < 0 ? -1 : keyStart + keyLength,
          valueStart,
          valueLength < 0 ? -1 : valueStart + valueLength,
        ),
      );
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
