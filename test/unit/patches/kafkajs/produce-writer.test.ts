// The produce request written into one buffer (kafkajs patch: recordBatch/v0/produceWriter.js, used
// by produce/v3/request.js for Produce v3-v7, and protocol/request.js framing it with one copy)
// must be byte for byte what kafkajs 2.2.4's own encoders write. Those encoders are kept unpatched
// under ./kafkajs-2.2.4-original/ (copied from the kafkajs 2.2.4 package, MIT), and every request
// below is encoded by both and compared, then decoded with kafkajs's own record batch decoder.
import { createRequire } from 'node:module';
import { kafkajsModule } from './wire';

const requireHere = createRequire(__filename);

type Encoded = { buffer: Buffer };
type Message = {
  key?: unknown;
  value?: unknown;
  headers?: unknown;
  timestamp?: unknown;
  partition?: number;
};
type Partition = { partition: number; firstSequence?: number; messages: Message[] };
type ProduceArgs = {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId?: unknown;
  producerEpoch?: number;
  compression?: number;
  topicData: Array<{ topic: string; partitions: Partition[] }>;
};
type ProduceRequest = (args: ProduceArgs) => { apiKey: number; apiVersion: number; encode(): Promise<Encoded> };
type FramedRequest = (args: { correlationId: number; clientId: string; request: ReturnType<ProduceRequest> }) => Promise<Encoded>;

const ours = kafkajsModule<ProduceRequest>('protocol/requests/produce/v3/request');
const original = requireHere('./kafkajs-2.2.4-original/produce-v3-request.js') as ProduceRequest;
const oursFramed = kafkajsModule<FramedRequest>('protocol/request');
const originalFramed = requireHere('./kafkajs-2.2.4-original/request.js') as FramedRequest;
const { crc32C } = kafkajsModule<{ crc32C(buf: Buffer, start: number, end: number): number }>('protocol/recordBatch/v0/produceWriter');
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

const NOW = 1_733_000_000_123;
beforeEach(() => {
  jest.spyOn(Date, 'now').mockReturnValue(NOW);
});
afterEach(() => {
  jest.restoreAllMocks();
});

/** A deterministic pseudo-random sequence. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const TEXTS = ['', 'a', 'key-1', 'é', 'ü-umlaut', '日本語', '😀 emoji', 'lone \ud800 surrogate', 'x'.repeat(200)];

function variedMessages(count: number, seed: number): Message[] {
  const r = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const text = () => pick(TEXTS) + String(Math.floor(r() * 1e6));
  // Header keys decode as strings: no lone surrogate there (it would come back as U+FFFD).
  const headerKey = () => pick(TEXTS.filter((t) => !t.includes('\ud800'))) + String(Math.floor(r() * 1e6));
  const bytes = () => Buffer.from(Array.from({ length: Math.floor(r() * 64) }, () => Math.floor(r() * 256)));
  return Array.from({ length: count }, (_, i) => {
    const kind = r();
    const key = kind < 0.1 ? null : kind < 0.15 ? undefined : kind < 0.6 ? text() : bytes();
    const v = r();
    const value = v < 0.1 ? null : v < 0.5 ? JSON.stringify({ i, s: text() }) : bytes();
    const h = r();
    const headers =
      h < 0.25
        ? undefined
        : h < 0.35
          ? {}
          : h < 0.8
            ? { 'kafka-flow-source': `in/3/${i}/0` }
            : { 'kafka-flow-source': `in/3/${i}/1`, [headerKey()]: [text(), bytes()], b: bytes(), e: '' };
    return { key, value, headers };
  });
}

/** Encodes with both and expects the same bytes, or the same error from both. */
async function expectSame(args: ProduceArgs): Promise<void> {
  let expected: { bytes: Buffer } | { error: string };
  try {
    expected = { bytes: (await original(args).encode()).buffer };
  } catch (err) {
    expected = { error: (err as Error).message };
  }
  if ('error' in expected) await expect(ours(args).encode()).rejects.toThrow(expected.error);
  else expect((await ours(args).encode()).buffer.toString('hex')).toBe(expected.bytes.toString('hex'));
}

async function bothEncode(args: ProduceArgs): Promise<{ a: Buffer; b: Buffer }> {
  const a = (await original(args).encode()).buffer;
  const b = (await ours(args).encode()).buffer;
  return { a, b };
}

function request(partitions: Partition[], extra: Partial<ProduceArgs> = {}): ProduceArgs {
  return {
    acks: -1,
    timeout: 30_000,
    transactionalId: 'kft-snapshot-3',
    producerId: Long.fromInt(4242),
    producerEpoch: 7,
    topicData: [{ topic: 'outputs', partitions }],
    ...extra,
  };
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
    const args = request([
      { partition: 0, firstSequence: 11, messages: messages.slice(0, 1_200) },
      { partition: 4, firstSequence: 0, messages: messages.slice(1_200, 1_201) },
      { partition: 5, messages: messages.slice(1_201) },
    ]);
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

    // A plugin codec (as kafkajs-snappy or kafkajs-lz4 register themselves): it gets an Encoder
    // holding the records and returns the compressed Buffer. This one reverses the bytes.
    const reverse = { compress: async (e: { buffer: Buffer }) => Buffer.from(e.buffer).reverse(), decompress: async (b: Buffer) => Buffer.from(b).reverse() };
    const saved = Codecs[CompressionTypes.Snappy!];
    Codecs[CompressionTypes.Snappy!] = () => reverse;
    try {
      const s = await bothEncode(request([{ partition: 0, messages }], { compression: CompressionTypes.Snappy }));
      expect(s.b.equals(s.a)).toBe(true);
      const back = await decodeBody(s.b);
      expect(back[0]!.records.map((r) => r.key)).toEqual(messages.map((m) => asBuffer(m.key)));
    } finally {
      Codecs[CompressionTypes.Snappy!] = saved;
    }
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
    for (const messages of odd) await expectSame(request([{ partition: 0, messages: [...variedMessages(5, 6), ...messages] }]));
    // kafkajs fails on a null header value (Buffer.byteLength(null)): so do we, with its error.
    const nullHeader = request([{ partition: 0, messages: [{ key: 'a', value: 'v', headers: { h: null } }] }]);
    await expect(original(nullHeader).encode()).rejects.toThrow('Received null');
    await expectSame(nullHeader);
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

test('CRC-32C eight bytes at a time equals kafkajs\'s byte-at-a-time table, over any range', () => {
  const r = random(9);
  for (const length of [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 1_000, 65_537]) {
    const buf = Buffer.from(Array.from({ length: length + 5 }, () => Math.floor(r() * 256)));
    expect(crc32C(buf, 3, 3 + length)).toBe(originalCrc32C(buf.subarray(3, 3 + length)));
  }
  expect(crc32C(Buffer.from('123456789'), 0, 9)).toBe(0xe3069283); // the CRC-32C check value
});
