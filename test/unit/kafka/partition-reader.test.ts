// The recovery reader filters a fetch itself (kafka/partition-reader.ts fetchedRecords) instead of
// through kafkajs's Batch, which parses every record's offset into a Long. It must keep exactly
// what Batch keeps: checked against Batch on fetches with records below the fetched offset (of
// other digit counts too), transaction markers, and aborted transactions of two producers.
import { createBatch, type FetchPartitionData, type RawMessage } from '../../../kafka/internals';
import { fetchedRecords } from '../../../kafka/partition-reader';

interface Spec {
  offset: number;
  producer: string;
  control?: 'commit' | 'abort';
  transactional?: boolean;
}

function message(s: Spec): RawMessage {
  // A control record's key: version (int16) and type (int16: 0 abort, 1 commit).
  const key = s.control ? Buffer.from([0, 0, 0, s.control === 'abort' ? 0 : 1]) : Buffer.from(`key-${s.offset}`);
  return {
    offset: String(s.offset),
    key,
    value: s.control ? Buffer.from([0, 0, 0, 0, 0, 0]) : Buffer.from(`value-${s.offset}`),
    timestamp: '0',
    headers: {},
    isControlRecord: s.control !== undefined,
    batchContext: { firstOffset: String(s.offset), lastOffsetDelta: 0, producerId: s.producer, inTransaction: s.transactional ?? true },
  };
}

function data(specs: Spec[], aborted: Array<{ producerId: string; firstOffset: string }> = []): FetchPartitionData {
  return { partition: 0, errorCode: 0, highWatermark: '1000', lastStableOffset: '1000', abortedTransactions: aborted, messages: specs.map(message) };
}

function expectSameAsBatch(d: FetchPartitionData, fetchedOffset: string): RawMessage[] {
  const batch = createBatch('t', fetchedOffset, d);
  const ours = fetchedRecords(d.messages, fetchedOffset, d.abortedTransactions);
  expect(ours.within.map((m) => m.offset)).toEqual(batch.messagesWithinOffset.map((m) => m.offset));
  expect(ours.records.map((m) => m.offset)).toEqual(batch.messages.map((m) => m.offset));
  return ours.records;
}

describe('fetchedRecords keeps what kafkajs\'s Batch keeps', () => {
  it('drops records below the fetched offset, across digit counts, and keeps the array when none is', () => {
    const d = data([7, 8, 9, 10, 11, 99, 100, 101].map((offset) => ({ offset, producer: '1', transactional: false })));
    expect(expectSameAsBatch(d, '10').map((m) => m.offset)).toEqual(['10', '11', '99', '100', '101']);
    expectSameAsBatch(d, '100');
    expectSameAsBatch(d, '9');
    expect(fetchedRecords(d.messages, '0', []).within).toBe(d.messages);
  });

  it('leaves out transaction markers but counts them within the fetch', () => {
    const d = data([{ offset: 0, producer: '1' }, { offset: 1, producer: '1' }, { offset: 2, producer: '1', control: 'commit' }, { offset: 3, producer: '1' }]);
    const ours = fetchedRecords(d.messages, '0', d.abortedTransactions);
    expect(ours.within).toHaveLength(4);
    expect(expectSameAsBatch(d, '0').map((m) => m.offset)).toEqual(['0', '1', '3']);
  });

  it('drops the records of aborted transactions, overlapping ones of two producers included', () => {
    // P1 starts at 1, P2 at 2 inside it; P2 aborts first (4), then P1 (6); P1 commits a later one.
    const d = data(
      [
        { offset: 0, producer: '9', transactional: false },
        { offset: 1, producer: '1' },
        { offset: 2, producer: '2' },
        { offset: 3, producer: '1' },
        { offset: 4, producer: '2', control: 'abort' },
        { offset: 5, producer: '1' },
        { offset: 6, producer: '1', control: 'abort' },
        { offset: 7, producer: '1' },
        { offset: 8, producer: '1', control: 'commit' },
      ],
      [
        { producerId: '2', firstOffset: '2' },
        { producerId: '1', firstOffset: '1' },
      ],
    );
    expect(expectSameAsBatch(d, '0').map((m) => m.offset)).toEqual(['0', '7']);
    expectSameAsBatch(d, '3');
  });
});
