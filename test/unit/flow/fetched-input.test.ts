// The flow's fetch decoder hands the engine FetchedRecords (kafka/fetch-decoder.ts): their key
// and value are getters over the fetch response, and they say where both are, so the engine reads
// the key's text and decodes the value from the response itself (the codec's decodeFrom) without a
// Buffer view per record. What the fold sees, the decode policies and the dead letters must be the
// same as for kafkajs's plain records carrying the same bytes.
import type { Codec } from '../../../core/codec/codec';
import { DecodeError } from '../../../core/codec/errors';
import { jsonCodec } from '../../../core/codec/json';
import type { OutputRecord } from '../../../core/persistence-types';
import type { DecodeFailurePolicy } from '../../../flow/decode-policy';
import type { KeyWrite } from '../../../flow/ports';
import type { FlowRecord, InputMessage } from '../../../flow/record';
import { FetchedRecord } from '../../../kafka/fetch-decoder';
import { harness } from './harness';

interface Spec {
  key: Buffer | null;
  value: Buffer | null;
  headers?: Record<string, Buffer>;
}

const specs: Spec[] = [
  { key: Buffer.from('a'), value: Buffer.from('{"n":1}') },
  { key: Buffer.from('bé✓'), value: Buffer.from('"héllo ✓ 😀"'), headers: { h: Buffer.from('x') } },
  { key: null, value: Buffer.from('1') }, // keyless: moves the offset on only
  { key: Buffer.from('a'), value: null }, // a tombstone: value null
  { key: Buffer.from(''), value: Buffer.from('[]') }, // an empty key is a key
  { key: Buffer.from([0x6b, 0xff]), value: Buffer.from('2') }, // a key that is not UTF-8: U+FFFD in its text, its bytes in a dead letter
  { key: Buffer.from('a'), value: Buffer.from([0x22, 0xff, 0x22]) }, // a value that is not UTF-8
  { key: Buffer.from('b'), value: Buffer.from('\uFEFF{"bom":1}', 'utf8') }, // a BOM: the strict decoder drops it
  { key: Buffer.from('b'), value: Buffer.from('{"x":') }, // not JSON
  { key: Buffer.from('c'), value: Buffer.from('"\uFFFD"', 'utf8') }, // a real U+FFFD
];

/** kafkajs's plain records, and ours over one response holding the same bytes (with bytes around them). */
function both(from: number): { plain: InputMessage[]; fetched: FetchedRecord[] } {
  const parts: Buffer[] = [Buffer.from([0xff, 0x22])];
  let at = 2;
  const places = specs.map((s) => {
    const place = { keyStart: at, keyEnd: -1, valueStart: at, valueEnd: -1 };
    if (s.key) {
      parts.push(s.key);
      at += s.key.length;
      place.keyEnd = at;
    }
    parts.push(Buffer.from([0xff]));
    at += 1;
    place.valueStart = at;
    if (s.value) {
      parts.push(s.value);
      at += s.value.length;
      place.valueEnd = at;
    }
    parts.push(Buffer.from([0xff]));
    at += 1;
    return place;
  });
  const response = Buffer.concat(parts);
  const context = { firstOffset: String(from), lastOffsetDelta: specs.length - 1, producerId: '-1', inTransaction: false } as never;
  const plain = specs.map((s, i) => ({ offset: String(from + i), key: s.key, value: s.value, timestamp: String(1000 + i), headers: s.headers ?? {} }));
  const fetched = specs.map((s, i) => {
    const p = places[i]!;
    return new FetchedRecord(0, String(1000 + i), from + i, s.headers ?? {}, false, context, response, p.keyStart, p.keyEnd, p.valueStart, p.valueEnd);
  });
  return { plain, fetched };
}

/** Folds the records and says what the fold saw, the states, the failure, and what was written with the dead letters. */
async function run(messages: InputMessage[], codec: Codec<unknown>, policy: DecodeFailurePolicy) {
  const seen: Array<Omit<FlowRecord<unknown>, 'headers'> & { headers: unknown }> = [];
  const h = await harness<unknown>({
    fold: (state, r) => {
      seen.push({ ...r, headers: { ...r.headers } });
      return [...((state as unknown[] | undefined) ?? []), r.value];
    },
    extra: { codec: codec as Codec<string>, onDecodeFailure: policy, deadLetterTopic: 'dlq' },
  });
  const writes: KeyWrite<unknown, string>[] = [];
  // biome-ignore lint/complexity/useLiteralKeys: the private options, to spy on the persistence they hold
  const persistence = h.flow['o'].persistence;
  const write = persistence.write.bind(persistence);
  persistence.write = (batch) => {
    writes.push(...batch.writes);
    return write(batch);
  };
  let failure: unknown;
  try {
    await h.flow.handleBatch(messages);
  } catch (err) {
    failure = err;
  }
  const states = failure === undefined ? [...h.flow.states()] : [];
  if (failure === undefined) await h.flow.persist(h.clock.now(), 'periodic');
  const deadLetters = writes.flatMap((w) => (w.outputs ?? []).map((o) => ({ key: (o as OutputRecord).key, value: (o as OutputRecord).value, headers: (o as OutputRecord).headers })));
  return {
    seen,
    states,
    position: h.flow.position,
    failure: failure === undefined ? undefined : { type: (failure as Error).constructor.name, message: (failure as Error).message, cause: ((failure as Error).cause as Error | undefined)?.message },
    deadLetters,
  };
}

describe('FetchedRecords fold as kafkajs records with the same bytes', () => {
  const codecs: Array<[string, Codec<unknown>]> = [
    ['jsonCodec (decodeFrom)', jsonCodec<unknown>()],
    // A codec without decodeFrom: the engine decodes the value's view (the record's getter).
    ['a codec without decodeFrom', { encode: (v) => Buffer.from(JSON.stringify(v)), decode: (b) => JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(b)) }],
  ];
  for (const [name, codec] of codecs) {
    for (const policy of ['skip', 'dead-letter'] as const) {
      test(`${name}, onDecodeFailure ${policy}`, async () => {
        const { plain, fetched } = both(10);
        const expected = await run(plain, codec, policy);
        const actual = await run(fetched, codec, policy);
        expect(actual).toStrictEqual(expected);
        // The runs did what the specs say, so the comparison above compared something.
        expect(expected.position).toBe(10 + specs.length);
        expect(expected.seen.map((r) => r.key)).toContain('k\uFFFD');
        expect(expected.states.length).toBeGreaterThanOrEqual(4);
        if (policy === 'dead-letter') {
          // The undecodable values (not UTF-8; not JSON) keep their original bytes, their keys too.
          expect(actual.deadLetters.map((d) => d.value)).toEqual([Buffer.from([0x22, 0xff, 0x22]), Buffer.from('{"x":')]);
          expect(actual.deadLetters.map((d) => d.key)).toEqual([Buffer.from('a'), Buffer.from('b')]);
        } else {
          expect(actual.deadLetters).toEqual([]);
        }
      });
    }
  }

  test('onDecodeFailure fail: the same DecodeError at the same record', async () => {
    const { plain, fetched } = both(0);
    const expected = await run(plain, jsonCodec<unknown>(), 'fail');
    expect(expected.failure).toMatchObject({ type: DecodeError.name });
    expect(await run(fetched, jsonCodec<unknown>(), 'fail')).toStrictEqual(expected);
  });
});
