// The recovery reader decodes Fetch v11 responses itself (kafka/fetch-decoder.ts): kafkajs's
// decoder spends most of a recovery read's CPU on Long strings per record. Its result must be
// kafkajs's, field for field; checked here on responses built with kafkajs's own record-batch
// encoder (headers repeated and empty, null keys and values, transactional and control batches,
// log-append time, a batch cut by maxBytes), and it must hand back to kafkajs (undefined) what it
// does not decode: a compressed batch.
import { createRequire } from 'node:module';
import { decodeFetchV11, FetchedRecord } from '../../../kafka/fetch-decoder';

const kafkajs = createRequire(require.resolve('kafkajs'));
const Encoder = kafkajs('./src/protocol/encoder');
const Long = kafkajs('./src/utils/long');
const { RecordBatch } = kafkajs('./src/protocol/recordBatch/v0');
const Record = kafkajs('./src/protocol/recordBatch/record/v0');
const { Types: Compression } = kafkajs('./src/protocol/message/compression');
const { decode: kafkajsDecode } = kafkajs('./src/protocol/requests/fetch/v11/response');

interface BatchSpec {
  firstOffset: number;
  records: Array<{ key: string | null; value: string | null; headers?: Record<string, string | string[]>; timestampDelta?: number }>;
  transactional?: boolean;
  control?: boolean;
  logAppendTime?: boolean;
  compression?: number;
}

async function batchBytes(spec: BatchSpec): Promise<Buffer> {
  const records = spec.records.map((r, i) =>
    Record({ offsetDelta: i, timestampDelta: r.timestampDelta ?? i * 7, key: r.key === null ? null : Buffer.from(r.key), value: r.value === null ? null : Buffer.from(r.value), headers: r.headers ?? {} }),
  );
  const encoded = await RecordBatch({
    compression: spec.compression ?? Compression.None,
    firstOffset: Long.fromNumber(spec.firstOffset),
    firstTimestamp: 1_700_000_000_000,
    maxTimestamp: 1_700_000_000_999,
    lastOffsetDelta: spec.records.length - 1,
    transactional: spec.transactional ?? false,
    producerId: Long.fromNumber(spec.transactional ? 4711 : -1),
    records,
  });
  const bytes: Buffer = encoded.buffer;
  // kafkajs's encoder writes neither control nor timestamp-type bits: set them in the attributes (CRC is not checked).
  const attributes = bytes.readInt16BE(21) | (spec.control ? 0x20 : 0) | (spec.logAppendTime ? 0x08 : 0);
  bytes.writeInt16BE(attributes, 21);
  return bytes;
}

/** A Fetch v11 response of one topic and one partition holding `records` (the record set's bytes). */
function response(records: Buffer, aborted: Array<[number, number]> = []): Buffer {
  const e = new Encoder()
    .writeInt32(0) // throttle
    .writeInt16(0) // error
    .writeInt32(7) // session
    .writeInt32(1) // topics
    .writeString('snapshots')
    .writeInt32(1) // partitions
    .writeInt32(3)
    .writeInt16(0)
    .writeInt64(Long.fromNumber(1_000))
    .writeInt64(Long.fromNumber(990))
    .writeInt64(Long.fromNumber(0))
    .writeInt32(aborted.length);
  for (const [producerId, firstOffset] of aborted) e.writeInt64(Long.fromNumber(producerId)).writeInt64(Long.fromNumber(firstOffset));
  e.writeInt32(-1) // preferred read replica
    .writeInt32(records.length);
  return Buffer.concat([e.buffer, records]);
}

type Decoded = { responses: Array<{ topicName: string; partitions: Array<Record<string, unknown> & { messages: Array<Record<string, unknown>> }> }> };

/**
 * A record as a reader sees it: kafkajs's fields read off it (ours' `key` and `value` are
 * getters), in a plain object, so that toStrictEqual compares the values and not the classes.
 */
function plain(m: Record<string, unknown>) {
  const { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord, batchContext } = m;
  return { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord, batchContext };
}

/** Every field of kafkajs's result, ours' `safeIntegerOffsets` marker left out (kafkajs's Batch reads it). */
function comparable(decoded: Decoded) {
  return decoded.responses.map((t) => ({
    topicName: t.topicName,
    partitions: t.partitions.map(({ safeIntegerOffsets: _marker, messages, ...partition }) => ({ ...partition, messages: messages.map(plain) })),
  }));
}

/** Ours' records say where their key and value are in the response (the engine reads them from there). */
function expectPlaces(decoded: Decoded) {
  for (const m of decoded.responses.flatMap((t) => t.partitions.flatMap((p) => p.messages)) as unknown as FetchedRecord[]) {
    expect(m).toBeInstanceOf(FetchedRecord);
    expect(m.keyEnd < 0 ? null : m.bytes.subarray(m.keyStart, m.keyEnd)).toStrictEqual(m.key);
    expect(m.valueEnd < 0 ? null : m.bytes.subarray(m.valueStart, m.valueEnd)).toStrictEqual(m.value);
    expect(String(m.offsetNumber)).toBe(m.offset);
    // The views are made once: the same Buffer at every read.
    if (m.key !== null) expect(m.key).toBe(m.key);
    if (m.value !== null) expect(m.value).toBe(m.value);
    // kafkajs's other fields are own fields of ours too (magicByte, offset, key and value: getters).
    for (const field of ['attributes', 'timestamp', 'headers', 'isControlRecord', 'batchContext']) expect(Object.hasOwn(m, field)).toBe(true);
    expect(JSON.parse(JSON.stringify(m))).toStrictEqual(JSON.parse(JSON.stringify(plain(m as never))));
  }
}

async function expectAsKafkajs(raw: Buffer) {
  const ours = decodeFetchV11(raw);
  expect(ours).toBeDefined();
  const theirs = await kafkajsDecode(raw);
  // toStrictEqual: the same keys with the same values (no field missing or extra, undefined included).
  expect(comparable(ours as never)).toStrictEqual(comparable(theirs));
  expectPlaces(ours as never);
  for (const p of ours!.responses.flatMap((r) => r.partitions)) expect(p.safeIntegerOffsets).toBe(true);
  expect([ours!.clientSideThrottleTime, ours!.errorCode, ours!.sessionId]).toEqual([theirs.clientSideThrottleTime, theirs.errorCode, theirs.sessionId]);
  return ours!;
}

describe('decodeFetchV11 decodes as kafkajs does', () => {
  it('plain, transactional and control batches, headers, null keys and values, log-append time', async () => {
    const records = Buffer.concat([
      await batchBytes({
        firstOffset: 0,
        records: [
          { key: 'a', value: '{"offset":1}', headers: { h1: 'x', h2: ['y', 'z'], '': 'empty name', ü: 'unicode' } },
          { key: null, value: 'no key' },
          { key: 'tombstone', value: null },
          { key: 'empty', value: '' },
          { key: 'negative delta', value: 'v', timestampDelta: -5 },
        ],
      }),
      await batchBytes({ firstOffset: 5, transactional: true, records: [{ key: 'in-tx', value: 'aborted' }] }),
      await batchBytes({ firstOffset: 6, transactional: true, control: true, records: [{ key: '\u0000\u0000\u0000\u0000', value: '\u0000\u0000\u0000\u0000\u0000\u0000' }] }),
      await batchBytes({ firstOffset: 12_345_678_901, logAppendTime: true, records: Array.from({ length: 200 }, (_, i) => ({ key: `k${i}`, value: 'x'.repeat(i * 3) })) }),
      // Runs of equal timestamps (ours shares one string per run), then another run of the first.
      await batchBytes({ firstOffset: 12_345_679_101, records: [4, 4, 4, 9, 9, 4, 0, 0, -1].map((timestampDelta, i) => ({ key: `t${i}`, value: 'v', timestampDelta })) }),
    ]);
    const decoded = await expectAsKafkajs(response(records, [[4711, 5]]));
    expect(decoded.responses[0]!.partitions[0]!.messages).toHaveLength(216);
  });

  it('leaves out a batch cut by maxBytes, as kafkajs does', async () => {
    const whole = Buffer.concat([
      await batchBytes({ firstOffset: 0, records: [{ key: 'a', value: 'one' }] }),
      await batchBytes({ firstOffset: 1, records: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: 'two' })) }),
    ]);
    for (const cut of [whole.length - 1, whole.length - 100, 80]) {
      const decoded = await expectAsKafkajs(response(whole.subarray(0, cut)));
      expect(decoded.responses[0]!.partitions[0]!.messages).toHaveLength(1);
    }
    await expectAsKafkajs(response(Buffer.alloc(0)));
  });

  it('hands a compressed batch back to kafkajs', async () => {
    const records = await batchBytes({ firstOffset: 0, compression: Compression.GZIP, records: [{ key: 'a', value: 'gzipped' }] });
    expect(decodeFetchV11(response(records))).toBeUndefined();
  });
});

describe("kafkajs's Batch over our decoded partitions (safeIntegerOffsets)", () => {
  const KafkajsBatch = kafkajs('./src/consumer/batch');

  /** What a consumer's eachBatch sees of a Batch, and what kafkajs's runner reads off it. */
  function view(b: Record<string, unknown> & Record<'firstOffset' | 'lastOffset' | 'offsetLag' | 'offsetLagLow' | 'isEmpty' | 'isEmptyIncludingFiltered' | 'isEmptyControlRecord' | 'isEmptyDueToLogCompactedMessages', () => unknown>) {
    return {
      messages: (b.messages as Array<Record<string, unknown>>).map(plain),
      messagesWithinOffset: (b.messagesWithinOffset as Array<Record<string, unknown>>).map(plain),
      firstOffset: b.firstOffset(),
      lastOffset: b.lastOffset(),
      offsetLag: b.offsetLag(),
      offsetLagLow: b.offsetLagLow(),
      isEmpty: b.isEmpty(),
      isEmptyIncludingFiltered: b.isEmptyIncludingFiltered(),
      isEmptyControlRecord: b.isEmptyControlRecord(),
      isEmptyDueToLogCompactedMessages: b.isEmptyDueToLogCompactedMessages(),
    };
  }

  it('keeps the same records as with kafkajs decoding, whatever the fetched offset', async () => {
    const raw = response(
      Buffer.concat([
        await batchBytes({ firstOffset: 100, records: Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })) }),
        await batchBytes({ firstOffset: 110, transactional: true, records: [{ key: 'aborted', value: 'x' }, { key: 'aborted', value: 'y' }] }),
        await batchBytes({ firstOffset: 112, transactional: true, control: true, records: [{ key: '\u0000\u0000\u0000\u0000', value: '\u0000\u0000\u0000\u0000\u0000\u0000' }] }),
        await batchBytes({ firstOffset: 113, records: [{ key: 'after', value: 'z' }] }),
      ]),
      [[4711, 110]],
    );
    const ours = decodeFetchV11(raw)!.responses[0]!.partitions[0]!;
    const theirs = (await kafkajsDecode(raw)).responses[0].partitions[0];
    let compared = 0;
    for (const fetched of ['0', '100', '105', '109', '110', '111', '112', '113', '114', '999', '9007199254740993', '18446744073709551615']) {
      const fast = view(new KafkajsBatch('t', fetched, ours));
      expect(fast).toStrictEqual(view(new KafkajsBatch('t', fetched, theirs)));
      expect(fast).toStrictEqual(view(new KafkajsBatch('t', fetched, { ...ours, safeIntegerOffsets: false })));
      compared += (fast.messages as unknown[]).length;
    }
    // The aborted records and the control record are dropped; fetched 0 keeps 11 (10 + 'after').
    expect(view(new KafkajsBatch('t', '0', ours)).messages).toHaveLength(11);
    expect(compared).toBe(11 + 11 + 6 + 2 + 1 + 1 + 1 + 1);
  });
});
