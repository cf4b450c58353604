// The pure parts of the hanging-transaction repair: which partition holds a group's offsets, which
// described producers are hanging, and the bytes of DescribeProducers v0 / WriteTxnMarkers v1.
import { commitsHanging, groupOffsetsPartition, hangingOf } from '../../../kafka/hanging-transactions';
import { decodeDescribeTransactionsV0Response, describeTransactionsV0Request } from '../../../kafka/protocol/describe-transactions-v0';
import { decodeDescribeProducersV0Response, type DescribedPartition, describeProducersV0Request } from '../../../kafka/protocol/describe-producers-v0';
import { Encoder } from '../../../kafka/protocol/kafkajs-protocol';
import { decodeWriteTxnMarkersV1Response, writeTxnMarkersV1Request } from '../../../kafka/protocol/write-txn-markers-v1';

describe('groupOffsetsPartition', () => {
  it("is Kafka's abs(String.hashCode) modulo the partition count", () => {
    expect(groupOffsetsPartition('group', 10)).toBe(98_629_247 % 10); // "group".hashCode() = 98629247
    expect(groupOffsetsPartition('group', 50)).toBe(98_629_247 % 50);
    // "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    expect(groupOffsetsPartition('polygenelubricants', 50)).toBe(0);
    // Values from Java 17: "zzzzzzzzzz".hashCode() = -1580979136; "grüße-gruppe" (UTF-16 units) = 80269105.
    expect(groupOffsetsPartition('zzzzzzzzzz', 50)).toBe(36);
    expect(groupOffsetsPartition('grüße-gruppe', 50)).toBe(5);
  });
});

describe('hangingOf', () => {
  const producer = (producerId: string, producerEpoch: number, currentTxnStartOffset: string) => ({ producerId, producerEpoch, lastSequence: 0, lastTimestamp: '0', coordinatorEpoch: 3, currentTxnStartOffset });
  const described: DescribedPartition[] = [
    { topic: 's', partition: 0, errorCode: 0, errorMessage: null, activeProducers: [producer('7', 4, '120'), producer('8', 1, '5')] },
    { topic: 's', partition: 1, errorCode: 0, errorMessage: null, activeProducers: [producer('7', 4, '-1')] },
    { topic: 'o', partition: 2, errorCode: 0, errorMessage: null, activeProducers: [producer('7', 9, '40')] },
    { topic: 'o', partition: 3, errorCode: 6, errorMessage: 'not leader', activeProducers: [producer('7', 4, '1')] },
  ];

  it("is our producer id's open transactions of an earlier epoch: not other producers', not closed ones, not the current epoch's", () => {
    expect(hangingOf(described, { producerId: '7', producerEpoch: 9 })).toEqual([
      { topic: 's', partition: 0, producerId: '7', producerEpoch: 4, coordinatorEpoch: 3, startOffset: '120' },
    ]);
    expect(hangingOf(described, { producerId: '7', producerEpoch: 10 }).map((h) => `${h.topic}-${h.partition}`)).toEqual(['s-0', 'o-2']);
    expect(hangingOf(described, { producerId: '9', producerEpoch: 10 })).toEqual([]);
  });
});

describe('commitsHanging: the outcome its coordinator decided, read before the initialization', () => {
  const h = { topic: '__consumer_offsets', partition: 5, producerId: '17', producerEpoch: 62, coordinatorEpoch: 1, startOffset: '1813' };
  const state = (state: string, producerEpoch: number, producerId = '17', errorCode = 0) => ({ errorCode, transactionalId: 't', state, producerId, producerEpoch });

  it("commits what was committing: the transaction's epoch (classic) or the one after (version 2's bump at the end)", () => {
    expect(commitsHanging(h, state('CompleteCommit', 62))).toBe(true);
    expect(commitsHanging(h, state('CompleteCommit', 63))).toBe(true);
    expect(commitsHanging(h, state('PrepareCommit', 63))).toBe(true);
  });

  it('aborts what was aborting or ongoing (the initialization aborts it), another producer id or epoch, an error, or nothing known', () => {
    expect(commitsHanging(h, state('CompleteAbort', 63))).toBe(false);
    expect(commitsHanging(h, state('PrepareAbort', 63))).toBe(false);
    expect(commitsHanging(h, state('Ongoing', 62))).toBe(false);
    expect(commitsHanging(h, state('Empty', 63))).toBe(false);
    expect(commitsHanging(h, state('CompleteCommit', 70))).toBe(false); // a later transaction's outcome
    expect(commitsHanging(h, state('CompleteCommit', 63, '18'))).toBe(false);
    expect(commitsHanging(h, state('CompleteCommit', 63, '17', 15))).toBe(false);
    expect(commitsHanging(h, undefined)).toBe(false);
  });
});

describe('DescribeProducers v0, DescribeTransactions v0 and WriteTxnMarkers v1 bytes', () => {
  it('DescribeTransactions: the ids as a compact array; the state of each read from the answer', async () => {
    const body = (await describeTransactionsV0Request(['t']).encode()).buffer;
    expect([...body]).toEqual([0, 2, 2, 0x74, 0]);
    const partitions = new Encoder().writeUVarIntString('s').writeUVarIntArray([new Encoder().writeInt32(0)]).writeUVarInt(0);
    const state = new Encoder()
      .writeInt16(0)
      .writeUVarIntString('t')
      .writeUVarIntString('CompleteCommit')
      .writeInt32(60_000)
      .writeInt64('1000')
      .writeInt64('17')
      .writeInt16(63)
      .writeUVarIntArray([partitions])
      .writeUVarInt(0);
    const raw = new Encoder().writeUVarInt(0).writeInt32(0).writeUVarIntArray([state]).writeUVarInt(0).buffer;
    expect(await decodeDescribeTransactionsV0Response(raw)).toEqual([{ errorCode: 0, transactionalId: 't', state: 'CompleteCommit', producerId: '17', producerEpoch: 63 }]);
  });

  const compactString = (s: string) => new Encoder().writeUVarIntString(s);

  it('DescribeProducers: the request is the flexible body; the answer is read per partition', async () => {
    const body = (await describeProducersV0Request([{ topic: 't', partitions: [0, 2] }]).encode()).buffer;
    // header tag buffer; topics (1 + 1); "t"; partitions (2 + 1): 0, 2; topic tags; request tags
    expect([...body]).toEqual([0, 2, 2, 0x74, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0]);

    const producerState = new Encoder().writeInt64('17').writeInt32(62).writeInt32(4).writeInt64('1000').writeInt32(1).writeInt64('1813').writeUVarInt(0);
    const partition = new Encoder().writeInt32(5).writeInt16(0).writeUVarIntString(null).writeUVarIntArray([producerState]).writeUVarInt(0);
    const topic = compactString('__consumer_offsets').writeUVarIntArray([partition]).writeUVarInt(0);
    const raw = new Encoder().writeUVarInt(0).writeInt32(0).writeUVarIntArray([topic]).writeUVarInt(0).buffer;
    expect(await decodeDescribeProducersV0Response(raw)).toEqual([
      {
        topic: '__consumer_offsets', partition: 5, errorCode: 0, errorMessage: null,
        activeProducers: [{ producerId: '17', producerEpoch: 62, lastSequence: 4, lastTimestamp: '1000', coordinatorEpoch: 1, currentTxnStartOffset: '1813' }],
      },
    ]);
  });

  it('WriteTxnMarkers: an ABORT marker with its coordinator epoch; the answer per partition', async () => {
    const body = (await writeTxnMarkersV1Request([{ producerId: '17', producerEpoch: 62, commit: false, coordinatorEpoch: 1, topics: [{ topic: 't', partitions: [5] }] }]).encode()).buffer;
    expect([...body]).toEqual([
      0, // header tags
      2, // markers: 1
      0, 0, 0, 0, 0, 0, 0, 17, // producer id
      0, 62, // producer epoch
      0, // ABORT
      2, 2, 0x74, 2, 0, 0, 0, 5, 0, // topics: "t" [5], tags
      0, 0, 0, 1, // coordinator epoch
      0, // marker tags
      0, // request tags
    ]);
    const partition = new Encoder().writeInt32(5).writeInt16(0).writeUVarInt(0);
    const topic = compactString('t').writeUVarIntArray([partition]).writeUVarInt(0);
    const marker = new Encoder().writeInt64('17').writeUVarIntArray([topic]).writeUVarInt(0);
    const raw = new Encoder().writeUVarInt(0).writeUVarIntArray([marker]).writeUVarInt(0).buffer;
    expect(await decodeWriteTxnMarkersV1Response(raw)).toEqual([{ producerId: '17', topic: 't', partition: 5, errorCode: 0 }]);
  });
});
