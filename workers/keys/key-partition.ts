import { murmur2, partitionOfHash } from '../../core/murmur2';

/**
 * The partition a producer puts `key` in: Kafka's default partitioner — Java's (`BuiltInPartitioner`,
 * murmur2 of the key's bytes) and kafkajs's `DefaultPartitioner` (the default of kafkajs 2, which
 * this project's producers, examples and tests use) — over the key's UTF-8 bytes. kafkajs's
 * `LegacyPartitioner` (kafkajs 1's default) places keys differently: its producers' keys are found
 * by giving the partition.
 */
export function partitionOfKey(key: string, partitions: number): number {
  return partitionOfHash(murmur2(Buffer.from(key, 'utf8')), partitions);
}
