/**
 * Which segment of the keys table a key lives in: kafka-flow's CassandraKeys rule,
 * `abs(key.hashCode.toLong % segments)`, with Java's `String.hashCode` (s[0]·31^(n−1) + … + s[n−1]
 * over UTF-16 code units, in 32-bit two's complement). Computing it the same way means keys
 * written by kafka-flow (Scala) and by this project land in, and are listed from, the same
 * segments — but only with the same `keySegments`: changing it later hides existing keys from
 * recovery (they are looked for in other segments).
 */

/** Java's `String.hashCode` of `s`: a signed 32-bit integer. */
export function javaStringHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.charCodeAt(i)) | 0;
  return h;
}

/** The key's segment, 0 ≤ segment < segments. */
export function keySegment(key: string, segments: number): number {
  // Java's % keeps the dividend's sign, as JavaScript's does; abs() then folds negatives over.
  return Math.abs(javaStringHashCode(key) % segments);
}

/** Segments 0..segments−1 in chunks of at most `size`, for `segment IN (...)` queries. */
export function segmentChunks(segments: number, size: number): number[][] {
  const chunks: number[][] = [];
  for (let from = 0; from < segments; from += size) {
    const chunk: number[] = [];
    for (let s = from; s < Math.min(segments, from + size); s++) chunk.push(s);
    chunks.push(chunk);
  }
  return chunks;
}
