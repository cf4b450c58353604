// The read_committed filter of kafkajs's consumer Batch (and of our partition reader). The broker
// lists a fetch's aborted transactions in the order they *ended* (its transaction index), so the
// filter must walk them by first offset and enter every one that has started.
import { kafkajsModule } from './wire';

interface Message {
  offset: string;
  key: Buffer | null;
  isControlRecord: boolean;
  batchContext: { producerId: string; inTransaction: boolean };
}
type Filter = (args: {
  messages: Message[];
  abortedTransactions: Array<{ producerId: string; firstOffset: string }>;
}) => Message[];

const filterAbortedMessages = kafkajsModule<Filter>('consumer/filterAbortedMessages');

const ABORT_KEY = Buffer.from([0, 0, 0, 0]); // control record key: version 0, type 0 (abort)
const data = (offset: number, producerId: string, inTransaction = true): Message => ({
  offset: String(offset),
  key: Buffer.from(`k${offset}`),
  isControlRecord: false,
  batchContext: { producerId, inTransaction },
});
const abortMarker = (offset: number, producerId: string): Message => ({
  offset: String(offset),
  key: ABORT_KEY,
  isControlRecord: true,
  batchContext: { producerId, inTransaction: true },
});
const visible = (messages: Message[]) => messages.filter((m) => !m.isControlRecord).map((m) => Number(m.offset));

describe('filterAbortedMessages', () => {
  it('drops overlapping aborted transactions of two producers that end in reverse order', () => {
    const messages = [
      data(0, '1'), // P1's aborted transaction starts
      data(1, '2'), // P2's aborted transaction starts inside P1's
      data(2, '1'),
      abortMarker(3, '2'), // P2 ends first ...
      data(4, '1'),
      abortMarker(5, '1'), // ... P1 last
      data(6, '3'), // a committed record of a third producer
      data(7, '4', false), // a non-transactional record
    ];
    // The broker's order: by the end of the transaction, so P2 (first offset 1) before P1 (0).
    const abortedTransactions = [
      { producerId: '2', firstOffset: '1' },
      { producerId: '1', firstOffset: '0' },
    ];
    expect(visible(filterAbortedMessages({ messages, abortedTransactions }))).toEqual([6, 7]);
  });

  it('enters every aborted transaction that started before the first fetched record', () => {
    // A fetch from offset 2 lands inside two aborted transactions (first offsets 0 and 1).
    const messages = [data(2, '2'), data(3, '1'), abortMarker(4, '1'), abortMarker(5, '2'), data(6, '1')];
    const abortedTransactions = [
      { producerId: '1', firstOffset: '0' },
      { producerId: '2', firstOffset: '1' },
    ];
    expect(visible(filterAbortedMessages({ messages, abortedTransactions }))).toEqual([6]);
  });

  it('keeps a later committed transaction of a producer whose earlier one aborted', () => {
    const messages = [data(0, '1'), abortMarker(1, '1'), data(2, '1'), data(3, '1')];
    expect(
      visible(filterAbortedMessages({ messages, abortedTransactions: [{ producerId: '1', firstOffset: '0' }] })),
    ).toEqual([2, 3]);
  });
});
