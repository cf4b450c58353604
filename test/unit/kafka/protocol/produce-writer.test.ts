// The produce request written into one buffer (kafka/protocol/produce-writer.ts, which the
// kafkajs patch's Produce v3-v7 request calls through its `writeProduceBody` hook, and
// protocol/request.js framing it with one copy) must be byte for byte what kafkajs 2.2.4's own
// encoders write. Those encoders are kept unpatched under ./kafkajs-2.2.4-original/ (copied from the
// kafkajs 2.2.4 package, MIT), and every request below is encoded by both and compared, then
// decoded with kafkajs's own record batch decoder; fixtures/produce-writer.json holds what the writer
// wrote when it was JavaScript in the patch.
import { createRequire } from 'node:module';
import { crc32c } from '../../../../kafka/protocol/crc32c';
import { type ProduceRequestBody, writeProduceBody } from '../../../../kafka/protocol/produce-writer';
import fixture from './fixtures/produce-writer.json';
import { encodedMessage, fixtureRequests, type Message, NOW, type ProduceArgs, REVERSE_CODEC_TYPE, random, request, reverseCodec, variedMessages } from './produce-cases';
import { kafkajsModule } from '../../patches/kafkajs/wire';

const requireHere = createRequire(__filename);

type Encoded = { buffer: Buffer };
type ProduceRequest = (args: ProduceArgs) => { apiKey: number; apiVersion: number; encode(): Promise<Encoded> };
type FramedRequest = (args: { correlationId: number; clientId: string; request: ReturnType<ProduceRequest> }) => Promise<Encoded>;

/** The patched kafkajs request: the writer through the hook, kafkajs's encoders for other shapes. */
const ours = kafkajsModule<ProduceRequest>('protocol/requests/produce/v3/request');
const original = requireHere('./kafkajs-2.2.4-original/produce-v3-request.js') as ProduceRequest;
const oursFramed = kafkajsModule<FramedRequest>('protocol/request');
const originalFramed = requireHere('./kafkajs-2.2.4-original/request.js') as FramedRequest;
const originalCrc32C = requireHere('./kafkajs-2.2.4-original/crc32c-index.js') as (buf: Buffer) => number;
const Long = kafkajsModule<{ fromInt(n: number): unknown; fromValue(v: unknown): unknown }>('utils/long');
const { Types: CompressionTypes, Codecs } = kafkajsModule<{ Types: Record<string, number>; Codecs: Record<number, unknown> }>(
  'protocol/message/compression',
);
const Decoder = kafkajsModule<new (buf: Buffer) => unknown>('protocol/decoder');
const decodeRecordBatch = kafkajsModule<(d: unknown) => Promise<{ records: DecodedRecord[]; firstSequence: number; inTransaction: boolean }>>(
  'protocol/recordBatch/v0/decoder',
);
type DecodedRecord = { key: Buffer | null; value: Buffer | null; headers: Record<string, Buffer | Buffer[]>; offset: string; timestamp: string };

beforeEach(() => {
  jest.spyOn(Date, 'now').mockReturnValue(NOW);
});
afterEach(() => {
  jest.restoreAllMocks();
});

/** The writer called directly, with the defaults kafkajs's Produce v3 request applies. */
function writer(args: ProduceArgs): Promise<Buffer | undefined> {
  return writeProduceBody({ transactionalId: null, producerId: Long.fromInt(-1), producerEpoch: 0, compression: 0, ...args } as ProduceRequestBody);
}

/** Encodes with both and expects the same bytes, or the same error from both; and the writer's own bytes, unless it left the request to kafkajs's encoders. */
async function expectSame(args: ProduceArgs): Promise<void> {
  let expected: { bytes: Buffer } | { error: string };
  try {
    expected = { bytes: (await original(args).encode()).buffer };
  } catch (err) {
    expected = { error: (err as Error).message };
  }
  if ('error' in expected) {
    await expect(ours(args).encode()).rejects.toThrow(expected.error);
  } else {
    expect((await ours(args).encode()).buffer.toString('hex')).toBe(expected.bytes.toString('hex'));
    const direct = await writer(args);
    if (direct) expect(direct.toString('hex')).toBe(expected.bytes.toString('hex'));
  }
}

/** Both encodings, and the writer's: it takes every request of the common shape. */
async function bothEncode(args: ProduceArgs): Promise<{ a: Buffer; b: Buffer }> {
  const a = (await original(args).encode()).buffer;
  const b = (await ours(args).encode()).buffer;
  const direct = await writer(args);
  expect(direct?.equals(b)).toBe(true);
  return { a, b };
}

/** Runs `run` with `reverseCodec` registered as kafkajs plugins register theirs. */
async function withReverseCodec(run: () => Promise<void>): Promise<void> {
  const saved = Codecs[REVERSE_CODEC_TYPE];
  Codecs[REVERSE_CODEC_TYPE] = () => reverseCodec;
  try {
    await run();
  } finally {
    Codecs[REVERSE_CODEC_TYPE] = saved;
  }
}

/** Decodes the record batches of a produce request body (our bytes) with kafkajs's own decoder. */
async function decodeBody(body: Buffer): Promise<Array<{ topic: string; partition: number; records: DecodedRecord[]; firstSequence: number }>> {
  const d = new Decoder(body) as {
    readString(): string;
    readInt16(): number;
    readInt32(): number;
    readBytes(n: number): Buffer;
  };
  d.readString();
  d.readInt16();
  d.readInt32();
  const out = [];
  for (let t = d.readInt32(); t > 0; t--) {
    const topic = d.readString();
    for (let p = d.readInt32(); p > 0; p--) {
      const partition = d.readInt32();
      const size = d.readInt32();
      const batch = await decodeRecordBatch(new Decoder(d.readBytes(size)));
      out.push({ topic, partition, records: batch.records, firstSequence: batch.firstSequence });
    }
  }
  return out;
}

const asBuffer = (v: unknown): Buffer | null => (v === null || v === undefined ? null : Buffer.isBuffer(v) ? v : Buffer.from(String(v)));

describe('the one-buffer produce writer', () => {
  test('varied records (null and undefined keys, null values, multi-byte text, Buffers, headers with arrays) are kafkajs 2.2.4\'s bytes and decode back', async () => {
    const messages = variedMessages(3_000, 1);
    const args = request(
      [
        { partition: 0, firstSequence: 11, messages: messages.slice(0, 1_200) },
        { partition: 4, firstSequence: 0, messages: messages.slice(1_200, 1_201) },
        { partition: 5, messages: messages.slice(1_201) },
      ],
      { producerId: Long.fromInt(4242) }, // as kafkajs's producer passes it
    );
    args.topicData.push({ topic: 'snapshots-é', partitions: [{ partition: 2, firstSequence: 3, messages: variedMessages(50, 2) }] });
    const { a, b } = await bothEncode(args);
    expect(b.equals(a)).toBe(true);

    const decoded = await decodeBody(b);
    expect(decoded.map((d) => [d.topic, d.partition, d.records.length, d.firstSequence])).toEqual([
      ['outputs', 0, 1_200, 11],
      ['outputs', 4, 1, 0],
      ['outputs', 5, 1_799, 0],
      ['snapshots-é', 2, 50, 3],
    ]);
    const first = decoded[0]!.records;
    first.forEach((rec, i) => {
      const m = messages[i]!;
      expect(rec.offset).toBe(String(i));
      expect(rec.timestamp).toBe(String(NOW));
      expect(rec.key).toEqual(asBuffer(m.key));
      expect(rec.value).toEqual(asBuffer(m.value));
      const headers = (m.headers ?? {}) as Record<string, unknown>;
      expect(Object.keys(rec.headers)).toEqual(Object.keys(headers));
      for (const [k, v] of Object.entries(headers)) {
        expect(rec.headers[k]).toEqual(Array.isArray(v) ? v.map(asBuffer) : asBuffer(v));
      }
    });
  });

  test('many records and large values, in requests of several topics', async () => {
    const many = Array.from({ length: 20_000 }, (_, i) => ({ key: `k${i % 2_000}`, value: `{"key":"k${i % 2_000}","n":${i},"count":3,"total":150}`, headers: { 'kafka-flow-source': `bench/1/${i}/0` } }));
    const large = [
      { key: 'big', value: Buffer.alloc(300_000, 0xab) },
      { key: 'big-text', value: 'ü'.repeat(100_000) },
      { key: Buffer.alloc(20_000, 1), value: null },
    ];
    const { a, b } = await bothEncode({
      ...request([{ partition: 1, firstSequence: 500, messages: many }]),
      topicData: [
        { topic: 'outputs', partitions: [{ partition: 1, firstSequence: 500, messages: many }] },
        { topic: 'snapshots', partitions: [{ partition: 0, firstSequence: 1, messages: large }] },
      ],
    });
    expect(b.length).toBeGreaterThan(1_000_000);
    expect(b.equals(a)).toBe(true);
  });

  test('timestamps: kafkajs\'s lexicographic sort, deltas past ±2^30 ms (varlong), strings, numbers, zero and empty', async () => {
    const cases: Message[][] = [
      [{ key: 'a', value: 'v', timestamp: '1000' }, { key: 'b', value: 'v', timestamp: '999' }, { key: 'c', value: 'v' }],
      [{ key: 'a', value: 'v', timestamp: String(NOW) }, { key: 'b', value: 'v', timestamp: String(NOW + 2 ** 31 + 5) }],
      [{ key: 'a', value: 'v', timestamp: String(NOW - 2 ** 30) }, { key: 'b', value: 'v', timestamp: String(NOW) }, { key: 'c', value: 'v', timestamp: String(NOW - 2 ** 30 + 1) }],
      [{ key: 'a', value: 'v', timestamp: NOW - 5 }, { key: 'b', value: null, timestamp: NOW + 7 }],
      [{ key: 'a', value: 'v', timestamp: 0 }, { key: 'b', value: 'v', timestamp: '' }, { key: 'c', value: 'v', timestamp: null }],
      [{ key: 'a', value: 'v', timestamp: 'not a number' }, { key: 'b', value: 'v', timestamp: String(NOW) }],
      [{ key: 'a', value: 'v', timestamp: 0 }, { key: 'b', value: 'v', timestamp: NOW }],
      [{ key: 'a', value: 'v', timestamp: NOW + 0.5 }, { key: 'b', value: 'v', timestamp: NOW }],
    ];
    // (kafkajs fails on some of them — an empty string, not a number —: so must we, the same way)
    for (const messages of cases) await expectSame(request([{ partition: 0, firstSequence: 0, messages }]));
  });

  test('no transactional id, producer id as a number and as a string, acks 1, an empty partition', async () => {
    for (const extra of [
      { transactionalId: null, producerId: -1, producerEpoch: 0 },
      { transactionalId: undefined, producerId: '9007199254740993', producerEpoch: 32_000, acks: 1 },
      { transactionalId: 'tx', producerId: Long.fromValue('123456789012') },
    ] as Array<Partial<ProduceArgs>>) {
      const { a, b } = await bothEncode(
        request(
          [
            { partition: 0, firstSequence: 2_147_483_000, messages: variedMessages(20, 3) },
            { partition: 1, firstSequence: 0, messages: [] },
          ],
          extra,
        ),
      );
      expect(b.equals(a)).toBe(true);
    }
  });

  test('compressed batches (GZIP, and a codec registered as kafkajs plugins are) are kafkajs 2.2.4\'s bytes and decode back', async () => {
    const messages = variedMessages(2_000, 4);
    const gzip = request([{ partition: 2, firstSequence: 9, messages }, { partition: 3, messages: messages.slice(0, 10) }], { compression: CompressionTypes.GZIP });
    const g = await bothEncode(gzip);
    expect(g.b.equals(g.a)).toBe(true);
    const decoded = await decodeBody(g.b);
    expect(decoded[0]!.records.map((r) => r.value)).toEqual(messages.map((m) => asBuffer(m.value)));

    // A plugin codec (as kafkajs-snappy or kafkajs-lz4 register themselves).
    await withReverseCodec(async () => {
      const s = await bothEncode(request([{ partition: 0, messages }], { compression: REVERSE_CODEC_TYPE }));
      expect(s.b.equals(s.a)).toBe(true);
      const back = await decodeBody(s.b);
      expect(back[0]!.records.map((r) => r.key)).toEqual(messages.map((m) => asBuffer(m.key)));
    });
  });

  test('an unimplemented codec fails as in kafkajs 2.2.4', async () => {
    const args = request([{ partition: 0, messages: variedMessages(3, 5) }], { compression: CompressionTypes.LZ4 });
    await expect(original(args).encode()).rejects.toThrow('LZ4 compression not implemented');
    await expect(ours(args).encode()).rejects.toThrow('LZ4 compression not implemented');
  });

  test('messages of another shape take kafkajs\'s own encoders: the same bytes, or the same error', async () => {
    const odd: Message[][] = [
      [{ key: 'a', value: 12_345 }],
      [{ key: new Uint8Array([1, 2, 3]), value: 'v' }],
      [{ key: 'a', value: 'v', headers: { h: 42 } }],
    ];
    for (const messages of odd) {
      const args = request([{ partition: 0, messages: [...variedMessages(5, 6), ...messages] }]);
      await expect(writer(args)).resolves.toBeUndefined();
      await expectSame(args);
    }
    // kafkajs fails on a null header value (Buffer.byteLength(null)): so do we, with its error.
    const nullHeader = request([{ partition: 0, messages: [{ key: 'a', value: 'v', headers: { h: null } }] }]);
    await expect(original(nullHeader).encode()).rejects.toThrow('Received null');
    await expectSame(nullHeader);
  });

  test('records encoded already go to kafkajs\'s encoders as plain key, value and headers when the request takes that path', async () => {
    const encoded = [encodedMessage('k1', '{"n":1}', [['kafka-flow-source', 'in/0/1/0']]), encodedMessage(null, 'v', [['a', '1'], ['a', '2']])];
    const plain = [
      { key: Buffer.from('k1'), value: Buffer.from('{"n":1}'), headers: { 'kafka-flow-source': Buffer.from('in/0/1/0') } },
      { key: null, value: Buffer.from('v'), headers: { a: [Buffer.from('1'), Buffer.from('2')] } },
    ];
    const odd = { key: new Uint8Array([1, 2, 3]), value: 'v' }; // not the writer's shape
    const args = request([{ partition: 0, messages: [...encoded, odd] }]);
    await expect(writer(args)).resolves.toBeUndefined();
    const expected = (await original(request([{ partition: 0, messages: [...plain, odd] }])).encode()).buffer;
    expect((await ours(args).encode()).buffer.equals(expected)).toBe(true);
  });

  test('the framed request (size, header, payload) is written with one copy and the same bytes', async () => {
    const args = request([{ partition: 0, firstSequence: 1, messages: variedMessages(500, 7) }]);
    for (const clientId of ['kafka-flow-temporal', 'clïent', null as unknown as string]) {
      const a = (await originalFramed({ correlationId: 77, clientId, request: original(args) })).buffer;
      const b = (await oursFramed({ correlationId: 77, clientId, request: ours(args) })).buffer;
      expect(b.equals(a)).toBe(true);
      expect(b.readInt32BE(0)).toBe(b.length - 4);
    }
  });
});

test('CRC-32C eight bytes at a time equals kafkajs\'s byte-at-a-time table, over any range and alignment', () => {
  const r = random(9);
  for (const length of [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 1_000, 65_537]) {
    for (const from of [0, 1, 2, 3, 5]) {
      const buf = Buffer.from(Array.from({ length: length + 8 }, () => Math.floor(r() * 256)));
      expect(crc32c(buf, from, from + length)).toBe(originalCrc32C(buf.subarray(from, from + length)));
    }
  }
  expect(crc32c(Buffer.from('123456789'), 0, 9)).toBe(0xe3069283); // the CRC-32C check value
});

test('the bytes the writer wrote when it was JavaScript in the kafkajs patch (fixtures/produce-writer.json)', async () => {
  const requests = fixtureRequests();
  expect(Object.keys(requests)).toEqual(Object.keys(fixture));
  await withReverseCodec(async () => {
    for (const [name, args] of Object.entries(requests)) {
      const hex = fixture[name as keyof typeof fixture];
      expect([name, (await writer(args))?.toString('hex')]).toEqual([name, hex]);
      expect([name, (await ours(args).encode()).buffer.toString('hex')]).toEqual([name, hex]);
      // kafkajs 2.2.4's encoders do not know records encoded already
      const plain = args.topicData.every((t) => t.partitions.every((p) => p.messages.every((m) => m.encoded === undefined)));
      if (plain) expect([name, (await original(args).encode()).buffer.toString('hex')]).toEqual([name, hex]);
    }
  });
});
