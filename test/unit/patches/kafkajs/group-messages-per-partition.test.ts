// The producer's grouping of a send's messages by partition (patched: linear; kafkajs 2.2.4 copied
// a partition's array for every message, quadratic — the largest cost of emitting one output per
// record, bench:outputs). Same result: every message in its partition, in the order given.
import { kafkajsModule } from './wire';

interface Message {
  key: string;
  partition: number;
}
type Group = (args: {
  topic: string;
  partitionMetadata: Array<{ partitionId: number }>;
  messages: Message[];
  partitioner: (args: { message: Message }) => number;
}) => Record<number, Message[]>;

const groupMessagesPerPartition = kafkajsModule<Group>('producer/groupMessagesPerPartition');
const partitionMetadata = [0, 1, 2].map((partitionId) => ({ partitionId }));
const byField = ({ message }: { message: Message }) => message.partition;

test('every message lands in its partition, in the order given', () => {
  const messages = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, partition: (i * 7) % 3 }));
  const grouped = groupMessagesPerPartition({ topic: 't', partitionMetadata, messages, partitioner: byField });
  expect(Object.keys(grouped).sort()).toEqual(['0', '1', '2']);
  for (const p of [0, 1, 2]) expect(grouped[p]).toEqual(messages.filter((m) => m.partition === p));
});

test('no partitions known: nothing grouped; no messages: an empty grouping', () => {
  expect(groupMessagesPerPartition({ topic: 't', partitionMetadata: [], messages: [{ key: 'a', partition: 0 }], partitioner: byField })).toEqual({});
  expect(groupMessagesPerPartition({ topic: 't', partitionMetadata, messages: [], partitioner: byField })).toEqual({});
});

test('a large send is grouped in linear time (100,000 messages in one partition)', () => {
  const messages = Array.from({ length: 100_000 }, (_, i) => ({ key: `k${i}`, partition: 0 }));
  const grouped = groupMessagesPerPartition({ topic: 't', partitionMetadata, messages, partitioner: byField });
  expect(grouped[0]).toHaveLength(100_000);
  expect(grouped[0]![99_999]).toBe(messages[99_999]);
});
