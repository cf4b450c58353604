/**
 * A Produce request body (v3-v7: transactional_id, acks, timeout, topics, partitions, one v2
 * record batch each) written into ONE buffer; the patch's Produce v3 request (which v4-v7 reuse)
 * calls it through the `writeProduceBody` hook. With `flexible`, the same fields as Produce v9-v12
 * write them (kafka/protocol/produce-v12.ts): the request header's tag buffer first, compact
 * strings, arrays and record sets (lengths + 1 as unsigned varints), an empty tag buffer closing
 * every struct.
 *
 * The bytes are exactly those of kafkajs 2.2.4's encoders (produce/v3/request.js, RecordBatch,
 * Record, Header), which made an Encoder per record and per header, copied every record into the
 * batch, the batch into its partition, the partition into its topic and the topic into the request,
 * and ran CRC-32C a byte at a time. Here a first pass sizes every record (produce-records.ts), the
 * whole body is allocated once, the second pass writes the records in place, and CRC-32C runs once
 * per batch over its bytes in the buffer. Compression: the records are written the same way into
 * their own buffer, which the codec compresses (as in kafkajs, the codec gets an Encoder holding
 * them).
 *
 * Undefined when a message is not of the shape produce-records.ts takes, or the codec is unknown:
 * kafkajs's encoders then write the request, with their exact bytes and errors.
 */
import { crc32c } from './crc32c';
import { COMPRESSION_CODEC_MASK, encoderHolding, int64Halves, type KafkajsCodec, lookupCodec } from './kafkajs-protocol';
import { batchTimestamps, type BatchTimes, type ProduceMessage, Sizes, sizeRecords, writeRecords } from './produce-records';

export interface ProduceRequestBody {
  acks: number;
  timeout: number;
  transactionalId: string | null | undefined;
  /** Anything kafkajs's `Long.fromValue` takes (its producer passes a Long or a number). */
  producerId: unknown;
  producerEpoch: number;
  /** A kafkajs CompressionTypes value; 0: none. */
  compression: number;
  /** Produce v9+'s encoding (KIP-482), with the request header v2's tag buffer first. */
  flexible?: boolean;
  topicData: ReadonlyArray<{
    topic: string;
    partitions: ReadonlyArray<{ partition: number; firstSequence?: number; messages: readonly ProduceMessage[] }>;
  }>;
}

const MAGIC_BYTE = 2;
const TRANSACTIONAL_MASK = 16;
/** int64 firstOffset + int32 batch length + int32 leader epoch + int8 magic + uint32 crc */
const BATCH_PREFIX = 8 + 4 + 4 + 1 + 4;
/** int16 attributes + int32 lastOffsetDelta + 2 * int64 timestamps + int64 producerId + int16 epoch + int32 firstSequence + int32 record count */
const BATCH_HEADER = 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;

/** One partition's record batch as the first pass planned it. */
interface PlannedBatch {
  partition: number;
  messages: readonly ProduceMessage[];
  firstSequence: number;
  times: BatchTimes;
  /** The whole batch, from firstOffset to its last record. */
  batchSize: number;
  /** The compressed records, when compressed. */
  compressed: Buffer | undefined;
  /** Its first record's index in the request, and where its sizes start in `Sizes`. */
  recordIndexBase: number;
  sizesFrom: number;
}

export async function writeProduceBody({
  acks,
  timeout,
  transactionalId,
  producerId,
  producerEpoch,
  compression,
  topicData,
  flexible = false,
}: ProduceRequestBody): Promise<Buffer | undefined> {
  let recordCount = 0;
  for (const { partitions } of topicData) {
    for (const { messages } of partitions) recordCount += messages.length;
  }
  const sizes = new Sizes(recordCount * 6);
  let codec: KafkajsCodec | null = null;
  if (compression !== 0) {
    codec = lookupCodec(compression);
    if (!codec) return undefined; // kafkajs's encoders fail on it as they always did
  }
  const attributes = (compression & COMPRESSION_CODEC_MASK) | (transactionalId ? TRANSACTIONAL_MASK : 0);

  // Pass 1: size everything (and compress, where asked).
  const transactionalIdLength = stringLength(transactionalId);
  const fields = flexible ? FLEXIBLE : CLASSIC;
  let size = (flexible ? 1 : 0) + fields.stringSize(transactionalId, transactionalIdLength) + 2 + 4 + fields.arraySize(topicData.length) + (flexible ? 1 : 0);
  const topics: Array<{ topic: string; topicLength: number; planned: PlannedBatch[] }> = [];
  let recordIndexBase = 0;
  for (const { topic, partitions } of topicData) {
    const topicLength = stringLength(topic);
    size += fields.stringSize(topic, topicLength) + fields.arraySize(partitions.length) + (flexible ? 1 : 0);
    const planned: PlannedBatch[] = [];
    for (const { partition, messages, firstSequence = 0 } of partitions) {
      const times = batchTimestamps(messages);
      const sizesFrom = sizes.length;
      const recordsSize = sizeRecords(messages, times, sizes, recordIndexBase);
      if (recordsSize < 0) return undefined;
      let compressed: Buffer | undefined;
      if (codec) {
        const recordsBuffer = Buffer.allocUnsafe(recordsSize);
        sizes.read = sizesFrom;
        writeRecords(recordsBuffer, 0, messages, times, sizes, recordIndexBase);
        compressed = await compress(codec, recordsBuffer);
      }
      const batchSize = BATCH_PREFIX + BATCH_HEADER + (compressed ? compressed.length : recordsSize);
      size += 4 + fields.bytesSize(batchSize) + batchSize + (flexible ? 1 : 0);
      planned.push({ partition, messages, firstSequence, times, batchSize, compressed, recordIndexBase, sizesFrom });
      recordIndexBase += messages.length;
    }
    topics.push({ topic, topicLength, planned });
  }

  // Pass 2: write.
  const buf = Buffer.allocUnsafe(size);
  let offset = flexible ? buf.writeUInt8(0, 0) : 0; // the request header v2's tag buffer
  offset = fields.writeString(buf, offset, transactionalId, transactionalIdLength);
  offset = buf.writeInt16BE(acks, offset);
  offset = buf.writeInt32BE(timeout, offset);
  offset = fields.writeArrayLength(buf, offset, topics.length);
  for (const { topic, topicLength, planned } of topics) {
    offset = fields.writeString(buf, offset, topic, topicLength);
    offset = fields.writeArrayLength(buf, offset, planned.length);
    for (const p of planned) {
      const { messages, times } = p;
      offset = buf.writeInt32BE(p.partition, offset);
      offset = fields.writeBytesLength(buf, offset, p.batchSize); // the record set's size
      offset = buf.writeInt32BE(0, offset); // firstOffset, int64 0
      offset = buf.writeInt32BE(0, offset);
      offset = buf.writeInt32BE(p.batchSize - 12, offset); // the batch's length after it
      offset = buf.writeInt32BE(0, offset); // partitionLeaderEpoch
      offset = buf.writeInt8(MAGIC_BYTE, offset);
      const crcAt = offset;
      offset += 4;
      const crcFrom = offset;
      offset = buf.writeInt16BE(attributes, offset);
      offset = buf.writeInt32BE(messages.length - 1, offset); // lastOffsetDelta
      offset = writeInt64(buf, offset, times.firstTimestamp);
      offset = writeInt64(buf, offset, times.maxTimestamp);
      offset = writeInt64(buf, offset, producerId);
      offset = buf.writeInt16BE(producerEpoch, offset);
      offset = buf.writeInt32BE(p.firstSequence, offset);
      offset = buf.writeInt32BE(messages.length, offset);
      if (p.compressed) {
        p.compressed.copy(buf, offset);
        offset += p.compressed.length;
      } else {
        sizes.read = p.sizesFrom;
        offset = writeRecords(buf, offset, messages, times, sizes, p.recordIndexBase);
      }
      buf.writeUInt32BE(crc32c(buf, crcFrom, offset), crcAt);
      if (flexible) offset = buf.writeUInt8(0, offset); // the partition's tag buffer
    }
    if (flexible) offset = buf.writeUInt8(0, offset); // the topic's tag buffer
  }
  if (flexible) offset = buf.writeUInt8(0, offset); // the body's tag buffer
  if (offset !== size) throw new Error(`produce request sized ${size} bytes, written ${offset}`);
  return buf;
}

/** The records compressed by `codec` (which gets them as kafkajs gives them: an Encoder holding them). */
async function compress(codec: KafkajsCodec, records: Buffer): Promise<Buffer> {
  const compressed = await codec.compress(encoderHolding(records));
  if (!Buffer.isBuffer(compressed)) throw new Error('value should be an instance of Buffer');
  return compressed;
}

function writeInt64(buf: Buffer, offset: number, value: unknown): number {
  const { high, low } = int64Halves(value);
  buf.writeInt32BE(high, offset);
  buf.writeInt32BE(low, offset + 4);
  return offset + 8;
}

const stringLength = (value: string | null | undefined): number => (value == null ? 0 : Buffer.byteLength(value, 'utf8'));

/** How one encoding (classic or flexible) sizes and writes the request's strings, arrays and record sets. */
interface FieldEncoding {
  stringSize(value: string | null | undefined, length: number): number;
  arraySize(count: number): number;
  bytesSize(length: number): number;
  writeString(buf: Buffer, offset: number, value: string | null | undefined, length: number): number;
  writeArrayLength(buf: Buffer, offset: number, count: number): number;
  writeBytesLength(buf: Buffer, offset: number, length: number): number;
}

/** v3-v8: (NULLABLE_)STRING with an INT16 length (-1: null), INT32 array counts and record set sizes. */
const CLASSIC: FieldEncoding = {
  stringSize: (value, length) => 2 + (value == null ? 0 : length),
  arraySize: () => 4,
  bytesSize: () => 4,
  writeString(buf, offset, value, length) {
    if (value == null) return buf.writeInt16BE(-1, offset);
    offset = buf.writeInt16BE(length, offset);
    return offset + buf.write(value, offset, length, 'utf8');
  },
  writeArrayLength: (buf, offset, count) => buf.writeInt32BE(count, offset),
  writeBytesLength: (buf, offset, length) => buf.writeInt32BE(length, offset),
};

/** v9+: COMPACT_(NULLABLE_)STRING, COMPACT_ARRAY and COMPACT_RECORDS, each length + 1 as an unsigned varint (0: null). */
const FLEXIBLE: FieldEncoding = {
  stringSize: (value, length) => (value == null ? 1 : sizeOfUVarInt(length + 1) + length),
  arraySize: (count) => sizeOfUVarInt(count + 1),
  bytesSize: (length) => sizeOfUVarInt(length + 1),
  writeString(buf, offset, value, length) {
    if (value == null) return writeUVarInt(buf, offset, 0);
    offset = writeUVarInt(buf, offset, length + 1);
    return offset + buf.write(value, offset, length, 'utf8');
  },
  writeArrayLength: (buf, offset, count) => writeUVarInt(buf, offset, count + 1),
  writeBytesLength: (buf, offset, length) => writeUVarInt(buf, offset, length + 1),
};

function sizeOfUVarInt(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    size += 1;
  }
  return size;
}

function writeUVarInt(buf: Buffer, offset: number, value: number): number {
  while (value >= 0x80) {
    buf[offset++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  buf[offset++] = value;
  return offset;
}
