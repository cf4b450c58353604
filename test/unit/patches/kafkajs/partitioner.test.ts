// kafkajs's default partitioner (patch: producer/partitioners/legacy/partitioner.js, which the
// default one wraps) lists the available partitions only for a message with neither partition nor
// key — it filtered the partition metadata for every message. The choices are kafkajs's.
import { keyPartition } from '../../../../kafka/internals';
import { kafkajsModule } from './wire';

type Partitioner = (args: { topic: string; partitionMetadata: Array<{ partitionId: number; leader: number }>; message: { partition?: number | null; key?: string | Buffer | null } }) => number;
const { DefaultPartitioner } = kafkajsModule<{ DefaultPartitioner: () => Partitioner }>('producer/partitioners/index');

const metadata = [0, 1, 2, 3, 4, 5].map((partitionId) => ({ partitionId, leader: partitionId === 2 || partitionId === 4 ? -1 : 1 }));

test('an explicit partition wins, a key goes by murmur2, neither round-robins over the partitions with a leader', () => {
  const partition = DefaultPartitioner();
  expect(partition({ topic: 't', partitionMetadata: metadata, message: { partition: 4, key: 'k' } })).toBe(4);
  expect(partition({ topic: 't', partitionMetadata: metadata, message: { partition: 0 } })).toBe(0);
  for (const key of ['k1', 'another key', Buffer.from([1, 2, 3])]) {
    expect(partition({ topic: 't', partitionMetadata: metadata, message: { key } })).toBe(keyPartition(key, metadata.length));
  }
  const seen = new Set(Array.from({ length: 40 }, () => partition({ topic: 't', partitionMetadata: metadata, message: { key: null } })));
  expect([...seen].sort()).toEqual([0, 1, 3, 5]);
  const noLeader = metadata.map((m) => ({ ...m, leader: -1 }));
  const p = partition({ topic: 'u', partitionMetadata: noLeader, message: {} });
  expect(p).toBeGreaterThanOrEqual(0);
  expect(p).toBeLessThan(6);
});
