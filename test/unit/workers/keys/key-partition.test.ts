// The partition a live state query looks in is the one the producer put the key in: Kafka's default
// partitioner — Java's murmur2 and kafkajs 2's DefaultPartitioner (the default of the producers of
// this project, its examples and tests) — not kafkajs 1's LegacyPartitioner.
import { murmur2 } from '../../../../core/murmur2';
import { partitionOfKey } from '../../../../workers/keys/key-partition';
import { kafkajsModule } from '../../patches/kafkajs/wire';

type Partitioner = (args: { topic: string; partitionMetadata: Array<{ partitionId: number; leader: number }>; message: { key?: string | Buffer | null } }) => number;
const { DefaultPartitioner, LegacyPartitioner } = kafkajsModule<{ DefaultPartitioner: () => Partitioner; LegacyPartitioner: () => Partitioner }>('producer/partitioners/index');

const metadata = (n: number) => Array.from({ length: n }, (_, partitionId) => ({ partitionId, leader: 1 }));
const keys = ['berlin', 'k0', 'k17', '', 'a/b c?', 'Zürich', '東京', 'x'.repeat(1000)];

describe('partitionOfKey', () => {
  test("is kafkajs's DefaultPartitioner for keys of every kind, over several partition counts", () => {
    const partition = DefaultPartitioner();
    for (const n of [1, 3, 6, 24, 100]) {
      for (const key of keys) expect(partitionOfKey(key, n)).toBe(partition({ topic: 't', partitionMetadata: metadata(n), message: { key } }));
    }
  });

  test("hashes the key's UTF-8 bytes with Java's murmur2 (Kafka's own test vectors)", () => {
    const java: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [key, hash] of java) {
      expect(murmur2(Buffer.from(key))).toBe(hash);
      expect(partitionOfKey(key, 1000)).toBe((hash & 0x7fffffff) % 1000);
    }
  });

  test("differs from kafkajs's LegacyPartitioner for some keys (its producers' keys are found by giving the partition)", () => {
    const legacy = LegacyPartitioner();
    const differing = keys.filter((key) => partitionOfKey(key, 24) !== legacy({ topic: 't', partitionMetadata: metadata(24), message: { key } }));
    expect(differing.length).toBeGreaterThan(0);
  });
});
