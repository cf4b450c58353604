/**
 * The `by-partition` snapshots layout's buckets: a Kafka partition's keys are spread over
 * `buckets` Cassandra partitions, the key's bucket being
 *
 *     uint32 big-endian of the first 4 bytes of MD5(UTF-8 bytes of the key)  mod  buckets
 *
 * — a hash every language computes the same way (Node's crypto here, `MessageDigest` on the JVM),
 * independent of the process, the platform and this project's version. MD5 is used as a
 * well-spread, well-defined checksum, not for security.
 *
 * The bucket count is a property of the table (like `keySegments` for the keys table): reading
 * with another count looks for keys in buckets they are not in. So the table records it in its
 * comment (`BUCKETS_COMMENT_PREFIX` + the count) and a backend with another count is refused.
 */
import { createHash } from 'node:crypto';

/** The most buckets a table may have (each a Cassandra partition scanned by every recovery). */
export const MAX_BUCKETS = 65_536;
/** The default bucket count of the by-partition layout (docs/cassandra.md: measured on a par with per-key rows for the fence). */
export const DEFAULT_BUCKETS = 256;

/** The key's bucket, 0 ≤ bucket < buckets. */
export function keyBucket(key: string, buckets: number): number {
  const digest = createHash('md5').update(key, 'utf8').digest();
  return digest.readUInt32BE(0) % buckets;
}

/** Buckets 0..buckets−1. */
export function allBuckets(buckets: number): number[] {
  return Array.from({ length: buckets }, (_, b) => b);
}

export const BUCKETS_COMMENT_PREFIX = 'kafka-flow-temporal snapshots by partition; buckets=';

/** The table comment that records a by-partition table's bucket count. */
export function bucketsComment(buckets: number): string {
  return `${BUCKETS_COMMENT_PREFIX}${buckets}`;
}

/** The bucket count a table's comment records, or undefined when it records none. */
export function bucketsFromComment(comment: string | null | undefined): number | undefined {
  if (!comment?.startsWith(BUCKETS_COMMENT_PREFIX)) return undefined;
  const rest = comment.slice(BUCKETS_COMMENT_PREFIX.length);
  if (!/^\d{1,9}$/.test(rest)) return undefined;
  return Number(rest);
}
