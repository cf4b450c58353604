/**
 * Produce requests for the writer's byte-for-byte tests: deterministic record sets (null and
 * undefined keys, null values, multi-byte text, Buffers, repeated and array headers, records
 * encoded already) and a fixed set whose bytes the writer must keep writing
 * (fixtures/produce-writer.json, written by the kafkajs patch's produceWriter.js before it moved to
 * kafka/protocol/produce-writer.ts).
 */
import { kafkajsModule } from '../../patches/kafkajs/wire';

const Encoder = kafkajsModule<new () => { writeVarInt(n: number): { buffer: Buffer } }>('protocol/encoder');

export type Message = {
  key?: unknown;
  value?: unknown;
  headers?: unknown;
  timestamp?: unknown;
  partition?: number;
  encoded?: Buffer;
  encodedStart?: number;
  encodedEnd?: number;
};
export type Partition = { partition: number; firstSequence?: number; messages: Message[] };
export type ProduceArgs = {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId?: unknown;
  producerEpoch?: number;
  compression?: number;
  topicData: Array<{ topic: string; partitions: Partition[] }>;
};

/** What every test's Date.now() answers (a batch's timestamps default to it). */
export const NOW = 1_733_000_000_123;

/** A deterministic pseudo-random sequence. */
export function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const TEXTS = ['', 'a', 'key-1', 'é', 'ü-umlaut', '日本語', '😀 emoji', 'lone \ud800 surrogate', 'x'.repeat(200)];

export function variedMessages(count: number, seed: number): Message[] {
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

/**
 * A record encoded already, as core/emitted-outputs.ts holds one: `encoded[encodedStart,
 * encodedEnd)` are its key, value and headers in the v2 record format, between other bytes.
 */
export function encodedMessage(key: string | null, value: string, headers: Array<[string, string]>, timestamp?: unknown): Message {
  const fields: Array<Buffer | null> = [key === null ? null : Buffer.from(key), Buffer.from(value)];
  const buf = Buffer.alloc(1_024);
  let at = 7; // bytes of something else before it
  const start = at;
  const writeVarInt = (n: number) => {
    at += new Encoder().writeVarInt(n).buffer.copy(buf, at);
  };
  const writeBytes = (bytes: Buffer | null) => {
    writeVarInt(bytes === null ? -1 : bytes.length);
    if (bytes !== null) at += bytes.copy(buf, at);
  };
  fields.forEach(writeBytes);
  writeVarInt(headers.length);
  for (const [name, v] of headers) {
    writeBytes(Buffer.from(name));
    writeBytes(Buffer.from(v));
  }
  return { key: '', value: null, encoded: buf, encodedStart: start, encodedEnd: at, ...(timestamp === undefined ? {} : { timestamp }) };
}

export function request(partitions: Partition[], extra: Partial<ProduceArgs> = {}): ProduceArgs {
  return {
    acks: -1,
    timeout: 30_000,
    transactionalId: 'kft-snapshot-3',
    producerId: '4242',
    producerEpoch: 7,
    topicData: [{ topic: 'outputs', partitions }],
    ...extra,
  };
}

/**
 * A codec registered as kafkajs's plugins register theirs (kafkajs-snappy, kafkajs-lz4): it gets an
 * Encoder holding the records and returns the compressed Buffer. This one reverses the bytes: the
 * same output everywhere (GZIP's can change with Node's zlib).
 */
export const reverseCodec = {
  compress: async (e: { buffer: Buffer }) => Buffer.from(e.buffer).reverse(),
  decompress: async (b: Buffer) => Buffer.from(b).reverse(),
};
/** The compression type the tests register `reverseCodec` as (Snappy's, which kafkajs lacks). */
export const REVERSE_CODEC_TYPE = 2;

/** The fixed requests of fixtures/produce-writer.json, by name (`compressed`: with `reverseCodec`). */
export function fixtureRequests(): Record<string, ProduceArgs> {
  const encoded = [
    encodedMessage('k1', '{"n":1}', [['kafka-flow-source', 'in/0/1/0']]),
    encodedMessage(null, 'v', []),
    encodedMessage('k3', 'ü'.repeat(40), [
      ['a', '1'],
      ['a', '2'],
      ['b', ''],
    ]),
  ];
  return {
    varied: {
      ...request([]),
      topicData: [
        {
          topic: 'outputs',
          partitions: [
            { partition: 0, firstSequence: 11, messages: variedMessages(60, 11) },
            { partition: 3, messages: variedMessages(1, 12) },
          ],
        },
        { topic: 'snapshots-é', partitions: [{ partition: 2, firstSequence: 3, messages: variedMessages(15, 13) }] },
      ],
    },
    encoded: request([{ partition: 1, firstSequence: 5, messages: [...encoded, ...variedMessages(10, 14), ...encoded] }]),
    timestamps: request([
      {
        partition: 0,
        messages: [
          { key: 'a', value: 'v', timestamp: String(NOW) },
          { key: 'b', value: 'v', timestamp: String(NOW + 2 ** 31 + 5) },
          encodedMessage('c', 'v', [], String(NOW - 3)),
          { key: 'd', value: 'v', timestamp: '999' },
          { key: 'e', value: null },
        ],
      },
    ]),
    compressed: request([{ partition: 2, firstSequence: 9, messages: [...variedMessages(40, 15), ...encoded] }], { compression: REVERSE_CODEC_TYPE }),
    untransactional: request([{ partition: 0, messages: variedMessages(10, 16) }, { partition: 1, messages: [] }], {
      transactionalId: null,
      producerId: '9007199254740993',
      producerEpoch: 0,
      acks: 1,
    }),
  };
}
