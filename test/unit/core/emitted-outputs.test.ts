// Emitted outputs held as bytes (core/emitted-outputs.ts): an emit is encoded at once into Kafka's
// v2 record bytes (key, value, headers) with its key's murmur2 hash, a key's emits are one Buffer,
// and the produce request written from them (kafka/protocol/produce-writer.ts copying each
// output's bytes) must be byte for byte the request written from the same outputs as records —
// which is what every output was before, and what kafkajs 2.2.4's own encoders write.
import { createRequire } from 'node:module';
import { jsonCodec } from '../../../core/codec/json';
import { appendOutputs, EmittedOutputs, outputCount, outputRecords, type PendingOutput, releaseOutputs } from '../../../core/emitted-outputs';
import { murmur2 } from '../../../core/murmur2';
import type { OutputRecord } from '../../../core/persistence-types';
import { EmitBuffer, OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import type { EmitRecord } from '../../../flow/fold';
import type { FlowRecord } from '../../../flow/record';
import type { KafkaAdmin } from '../../../kafka/admin';
import { plainMessage } from '../../../kafka/protocol/plain-message';
import { OutputTopics } from '../../../persistence/kafka/dead-letter';
import { kafkajsModule } from '../patches/kafkajs/wire';

const requireHere = createRequire(__filename);
type Message = Record<string, unknown>;
type ProduceRequest = (args: {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  compression?: number;
  topicData: Array<{ topic: string; partitions: Array<{ partition: number; messages: Message[] }> }>;
}) => { encode(): Promise<{ buffer: Buffer }> };
const ours = kafkajsModule<ProduceRequest>('protocol/requests/produce/v3/request');
const original = requireHere('../kafka/protocol/kafkajs-2.2.4-original/produce-v3-request.js') as ProduceRequest;
const kafkajsMurmur2 = kafkajsModule<(key: string | Buffer) => number>('producer/partitioners/default/murmur2');

const NOW = 1_733_000_000_123;
beforeEach(() => {
  jest.spyOn(Date, 'now').mockReturnValue(NOW);
});
afterEach(() => {
  jest.restoreAllMocks();
});

const outputs = { topics: new Set(['alerts', 'audit']), encoder: jsonCodec<unknown>() };
const record = (offset: number, key = 'k'): FlowRecord<unknown> =>
  ({ topic: 'in', partition: 2, offset: String(offset), key, value: null, timestamp: '0', headers: {} }) as unknown as FlowRecord<unknown>;

/** The records the emits of one fold each used to be (flow/emit.ts before bytes), for comparison. */
function asRecords(emits: EmitRecord[], offset: number): OutputRecord[] {
  return emits.map((e, index) => {
    const source = `in/2/${offset}/${index}`;
    return {
      kind: 'emitted',
      topic: e.topic,
      partition: e.partition,
      key: e.key ?? null,
      value: e.value === null || e.value === undefined ? null : Buffer.from(JSON.stringify(e.value)),
      headers: e.headers ? { ...e.headers, [OUTPUT_SOURCE_HEADER]: source } : { [OUTPUT_SOURCE_HEADER]: source },
    };
  });
}

/** Folds: each record's emits through an EmitBuffer onto one key's list. */
function emitAll(folds: EmitRecord[][], from = 0): PendingOutput[] {
  const ctx = new EmitBuffer(outputs);
  let list: PendingOutput[] | undefined;
  folds.forEach((emits, i) => {
    ctx.begin(record(from + i));
    for (const e of emits) ctx.emit(e);
    const taken = ctx.take();
    if (taken) list = appendOutputs(list, taken);
  });
  return list ?? [];
}

class FakeAdmin {
  readonly topics = new Map<string, number>([
    ['alerts', 6],
    ['audit', 3],
  ]);
  async describeTopic(topic: string) {
    const partitions = this.topics.get(topic);
    return partitions === undefined ? undefined : { partitions };
  }
  async ensureTopics() {}
}

/** The produce request's bytes for these messages (grouped by topic and partition in order, as kafkajs does). */
async function produceBytes(request: ProduceRequest, messages: Message[]): Promise<Buffer> {
  const topics = new Map<string, Map<number, Message[]>>();
  for (const m of messages) {
    const t = m.topic as string;
    const p = m.partition as number;
    if (!topics.has(t)) topics.set(t, new Map());
    const parts = topics.get(t)!;
    if (!parts.has(p)) parts.set(p, []);
    parts.get(p)!.push(m);
  }
  const topicData = [...topics].map(([topic, parts]) => ({ topic, partitions: [...parts].map(([partition, ms]) => ({ partition, messages: ms })) }));
  return (await request({ acks: -1, timeout: 30_000, transactionalId: 'tx', topicData }).encode()).buffer;
}

const folds: EmitRecord[][] = [
  [{ topic: 'alerts', key: 'k', value: { n: 1, total: 10 } }],
  [{ topic: 'alerts', key: 'k', value: { n: 2, text: 'é ü 😀 \ud800' } }],
  [
    { topic: 'alerts', key: null, value: 'a', headers: { trace: 'x' } },
    { topic: 'audit', key: 'z', value: null },
    { topic: 'alerts', key: Buffer.from([0xff, 0x00, 0x41]), value: 'long '.repeat(40), partition: 4 },
  ],
  [{ topic: 'alerts', key: 'ключ', value: { n: 4 }, headers: { [OUTPUT_SOURCE_HEADER]: 'mine', after: 'y' } }],
  Array.from({ length: 12 }, (_, i) => ({ topic: 'alerts', key: `k${i % 3}`, value: { i } })), // indexes past 9
  [{ topic: 'alerts', key: 'k', value: 'x'.repeat(70) }], // a short text whose UTF-8 bytes need a two-byte length
  [{ topic: 'alerts', key: 'k', value: 'ü'.repeat(63) }],
  [{ topic: 'alerts', key: 'a'.repeat(62) + 'é', value: `${'a'.repeat(62)}é` }], // ASCII written in JS until the last character
  [{ topic: 'alerts', key: 'K'.repeat(130), value: 'y'.repeat(100) }], // past the lengths written in JS
];

describe('murmur2 over bytes', () => {
  test("is kafkajs's (Java's) murmur2 for keys of every length, ASCII and not", () => {
    for (let n = 0; n < 40; n++) {
      for (const key of ['a'.repeat(n), `k${n}`, 'é'.repeat(n), String.fromCharCode(...Array.from({ length: n }, (_, i) => 32 + ((i * 37) % 90)))]) {
        const bytes = Buffer.from(key);
        expect(murmur2(bytes)).toBe(kafkajsMurmur2(key));
        const padded = Buffer.concat([Buffer.from('xyz'), bytes, Buffer.from('!')]);
        expect(murmur2(padded, 3, 3 + bytes.length)).toBe(kafkajsMurmur2(bytes));
      }
    }
  });
});

describe('EmittedOutputs', () => {
  test('a key holds its emits as one run of bytes, counted, decoded back to the records they were', () => {
    const list = emitAll(folds);
    expect(list).toHaveLength(1);
    const run = list[0] as EmittedOutputs;
    expect(run).toBeInstanceOf(EmittedOutputs);
    const expected = folds.flatMap((emits, i) => asRecords(emits, i));
    expect(outputCount(list)).toBe(expected.length);
    expect(run.topics).toEqual(['alerts', 'audit']);
    expect(run.topicCounts).toEqual([expected.length - 1, 1]);
    // records(): header values as strings, the key null when it was; a Buffer key stays a Buffer.
    const decoded = outputRecords(list);
    expect(decoded).toEqual(expected); // toEqual: an absent partition is an undefined one
    // The emit's own header of the source's name is replaced in its place.
    expect(Object.keys(decoded[5]!.headers!)).toEqual([OUTPUT_SOURCE_HEADER, 'after']);
  });

  test('a run whose outputs landed (releaseOutputs) holds a later key run: only its new outputs, counted from 0', () => {
    const landed = emitAll(folds);
    const run = landed[0] as EmittedOutputs;
    releaseOutputs(landed);
    expect(run.count).toBe(0);
    const next = emitAll([[{ topic: 'audit', key: 'z', value: { n: 9 } }]], 40);
    expect(next[0]).toBe(run); // reused, not a new run
    expect(run.topicCounts).toEqual([0, 1]);
    expect(outputRecords(next)).toEqual(asRecords([{ topic: 'audit', key: 'z', value: { n: 9 } }], 40));
  });

  test('an emit the bytes cannot hold (a Buffer header value) stays a record, and so do the later emits of its fold', () => {
    const list = emitAll([
      [{ topic: 'alerts', key: 'k', value: 1 }],
      [
        { topic: 'alerts', key: 'k', value: 2 },
        { topic: 'alerts', key: 'k', value: 3, headers: { bin: Buffer.from([1, 2]) } },
        { topic: 'alerts', key: 'k', value: 4 },
      ],
      [{ topic: 'alerts', key: 'k', value: 5 }],
    ]);
    expect(list.map((o) => (o instanceof EmittedOutputs ? `bytes:${o.count}` : `record:${String(o.value)}`))).toEqual([
      'bytes:2',
      'record:3',
      'record:4',
      'bytes:1',
    ]);
    expect(outputRecords(list).map((r) => [String(r.value), r.headers![OUTPUT_SOURCE_HEADER]])).toEqual([
      ['1', 'in/2/0/0'],
      ['2', 'in/2/1/0'],
      ['3', 'in/2/1/1'],
      ['4', 'in/2/1/2'],
      ['5', 'in/2/2/0'],
    ]);
  });

  test('a discarded fold leaves nothing; an emit after its fold finished throws', () => {
    const ctx = new EmitBuffer(outputs);
    ctx.begin(record(0));
    ctx.emit({ topic: 'alerts', key: 'k', value: 1 });
    ctx.discard();
    ctx.begin(record(1));
    expect(ctx.take()).toBeUndefined();
    expect(() => ctx.emit({ topic: 'alerts', key: 'k', value: 1 })).toThrow(/after the fold/);
  });
});

describe('the produce request written from emitted bytes', () => {
  test('is byte for byte the one written from the same outputs as records (ours and kafkajs 2.2.4), partitions by murmur2', async () => {
    const topics = new OutputTopics(new FakeAdmin() as unknown as KafkaAdmin);
    const from = { topic: 'in', partition: 2 };
    const fromBytes = (await topics.messages(emitAll(folds), from)) as unknown as Message[];
    const fromRecords = (await topics.messages(folds.flatMap((emits, i) => asRecords(emits, i)), from)) as unknown as Message[];
    expect(fromBytes.map((m) => [m.topic, m.partition])).toEqual(fromRecords.map((m) => [m.topic, m.partition]));
    expect(fromBytes.every((m) => Buffer.isBuffer(m.encoded))).toBe(true);
    const expected = await produceBytes(ours, fromRecords);
    expect((await produceBytes(ours, fromBytes)).equals(expected)).toBe(true);
    expect((await produceBytes(original, fromRecords)).equals(expected)).toBe(true);
    // Decoded back (plainMessage: kafkajs's encoders' fallback), the same bytes again.
    expect((await produceBytes(original, fromBytes.map(plainMessage))).equals(expected)).toBe(true);
  });

  test("from a transaction's message pool: the same objects again, pointing at the next outputs", async () => {
    const topics = new OutputTopics(new FakeAdmin() as unknown as KafkaAdmin);
    const from = { topic: 'in', partition: 2 };
    const pool = { messages: [] };
    const first = await topics.messages(emitAll(folds), from, pool);
    const next = emitAll(folds.slice(0, 2), 50);
    const again = await topics.messages(next, from, pool);
    const fresh = await topics.messages(next, from);
    expect(again).toEqual(fresh);
    for (let i = 0; i < again.length; i++) expect(again[i]).toBe(first[i]);
    expect((await produceBytes(ours, again as unknown as Message[])).equals(await produceBytes(ours, fresh as unknown as Message[]))).toBe(true);
  });

  test('mixed with records of other shapes in one batch, and with a timestamped record beside it', async () => {
    const topics = new OutputTopics(new FakeAdmin() as unknown as KafkaAdmin);
    const from = { topic: 'in', partition: 2 };
    const bytes = (await topics.messages(emitAll(folds.slice(0, 2)), from)) as unknown as Message[];
    const records = (await topics.messages(folds.slice(0, 2).flatMap((emits, i) => asRecords(emits, i)), from)) as unknown as Message[];
    const extra: Message = { topic: 'alerts', partition: bytes[0]!.partition, key: 'snap', value: Buffer.from('v'), timestamp: NOW - 5 };
    const expected = await produceBytes(original, [extra, ...records]);
    expect((await produceBytes(ours, [extra, ...bytes])).equals(expected)).toBe(true);
  });
});
