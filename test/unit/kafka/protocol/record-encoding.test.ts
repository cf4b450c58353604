// The records kafkajs's Produce request encodes for the requests the one-buffer writer leaves to it
// (kafka/protocol/record-v0.ts, through the kafkajs patch's `encodeRecord` hook: each record written
// into one Encoder of its exact size, headers inline, a small timestamp delta without Long objects).
// The bytes must be exactly kafkajs 2.2.4's: the golden values in fixtures/record-encoding.json were
// encoded by the unpatched modules from the inputs below.
import { encodeRecord, type RecordFields } from '../../../../kafka/protocol/record-v0';
import golden from './fixtures/record-encoding.json';
import { hex, kafkajsModule } from '../../patches/kafkajs/wire';

type Encoded = { buffer: Buffer };
type RecordInput = RecordFields & { key: string | Buffer | null; value: string | Buffer | null; headers?: Record<string, string | Buffer | Array<string | Buffer>> };

const produceV3 = kafkajsModule<(r: Record<string, unknown>) => { encode(): Promise<Encoded> }>('protocol/requests/produce/v3/request');
const Long = kafkajsModule<{ fromInt(n: number): unknown }>('utils/long');

/** Headers with repeated values, Buffer values, no headers; timestamp deltas at and past the varint fast path's ±2^30 edge. */
const records: RecordInput[] = [
  { key: 'k', value: Buffer.from('{"a":1}'), headers: { 'kafka-flow-source': 'in/0/12/0' } },
  { offsetDelta: 5, timestampDelta: 0, key: Buffer.from('bk'), value: 'string value ü', headers: {} },
  { offsetDelta: 300, timestampDelta: -7, key: null, value: null },
  { offsetDelta: 70000, timestampDelta: 123456, key: 'x', value: Buffer.alloc(700, 7), headers: { a: ['1', Buffer.from('2')], b: Buffer.from([0, 255]) } },
  { offsetDelta: 1, timestampDelta: 2 ** 31 + 5, key: 'big', value: 'v' },
  { offsetDelta: 2, timestampDelta: -(2 ** 30), key: 'edge', value: 'v' },
  { offsetDelta: 3, timestampDelta: 2 ** 30 - 1, key: 'edge2', value: 'v' },
];

test('a record with an output header, field by field', () => {
  expect(encodeRecord(records[0]!).buffer).toEqual(
    hex(`
      54                                      # length: 42 (zigzag varint)
      00                                      # attributes
      00                                      # timestamp delta 0
      00                                      # offset delta 0
      02 6b                                   # key "k"
      0e 7b2261223a317d                       # value {"a":1}
      02                                      # one header
      22 6b61666b612d666c6f772d736f75726365   # "kafka-flow-source"
      12 696e2f302f31322f30                   # "in/0/12/0"
    `),
  );
});

test('every record encodes to kafkajs 2.2.4\'s bytes', () => {
  expect(records.map((r) => encodeRecord(r).buffer.toString('hex'))).toEqual(golden.records);
});

test('a produce request (two partitions of record batches, headers on some records) encodes to kafkajs 2.2.4\'s bytes', async () => {
  const messages = Array.from({ length: 40 }, (_, i) => ({
    key: `key-${i % 3}`,
    value: i % 5 === 0 ? Buffer.from(JSON.stringify({ n: i })) : JSON.stringify({ n: i, s: 'x'.repeat(i) }),
    headers: i % 2 === 0 ? { 'kafka-flow-source': `t/0/${i}/0` } : undefined,
    timestamp: String(1700000000000 + i * 3),
  }));
  const request = produceV3({
    acks: -1,
    timeout: 30000,
    transactionalId: 'tx-1',
    producerId: Long.fromInt(42),
    producerEpoch: 3,
    topicData: [
      {
        topic: 'out',
        partitions: [
          { partition: 0, firstSequence: 7, messages: messages.slice(0, 25) },
          { partition: 2, firstSequence: 0, messages: messages.slice(25) },
        ],
      },
    ],
  });
  expect((await request.encode()).buffer.toString('hex')).toBe(golden.produce);
});
