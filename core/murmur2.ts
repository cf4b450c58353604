/**
 * Kafka's murmur2 (Java's `Utils.murmur2`, which kafkajs's default partitioner reimplements with a
 * `Long` object per four bytes) over `bytes[start, end)`, in 32-bit integer arithmetic: the same
 * values, no allocation. The partition of a key is `(murmur2(key) & 0x7fffffff) % partitions`.
 */
const SEED = 0x9747b28c;
const M = 0x5bd1e995;

export function murmur2(bytes: Uint8Array, start = 0, end = bytes.length): number {
  const length = end - start;
  let h = SEED ^ length;
  const whole = start + (length & ~3);
  let i = start;
  for (; i < whole; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const tail = length & 3;
  if (tail > 0) {
    if (tail === 3) h ^= bytes[i + 2]! << 16;
    if (tail >= 2) h ^= bytes[i + 1]! << 8;
    h ^= bytes[i]!;
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition Kafka's default partitioner gives a key whose murmur2 hash is `hash`. */
export function partitionOfHash(hash: number, partitions: number): number {
  return (hash & 0x7fffffff) % partitions;
}
