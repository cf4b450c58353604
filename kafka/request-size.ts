/**
 * Produce requests are kept under the broker's record-batch limit: kafkajs puts every record of a
 * `send` for one partition into ONE record batch, and the broker refuses a batch larger than the
 * topic's `max.message.bytes` (1 MiB by default) — so a large group-committed transaction is sent
 * as several requests inside the transaction.
 */

/** A little under the broker's default max.message.bytes (1,048,588), leaving room for batch headers. */
export const DEFAULT_MAX_REQUEST_BYTES = 1_000_000;

/** Per-record overhead in a v2 record batch (varints, attributes, deltas), rounded up. */
const RECORD_OVERHEAD = 32;

interface Sized {
  key: string | Buffer | null;
  value: string | Buffer | null;
  headers?: Record<string, string | Buffer>;
  /** A record encoded already: its bytes are `[encodedStart, encodedEnd)` of `encoded`. */
  encoded?: Buffer;
  encodedStart?: number;
  encodedEnd?: number;
}

/** The last header key sized, and its byte length: every output carries the same header key. */
let lastHeaderKey = '';
let lastHeaderKeyBytes = 0;

export function recordBytes(m: Sized): number {
  if (m.encoded !== undefined) return RECORD_OVERHEAD + m.encodedEnd! - m.encodedStart!;
  let n = RECORD_OVERHEAD + byteLength(m.key) + byteLength(m.value);
  const headers = m.headers;
  // for…in, not Object.entries: no array per record (every output carries a header).
  if (headers) {
    for (const k in headers) {
      if (k !== lastHeaderKey) {
        lastHeaderKey = k;
        lastHeaderKeyBytes = Buffer.byteLength(k);
      }
      n += 8 + lastHeaderKeyBytes + byteLength(headers[k]);
    }
  }
  return n;
}

function byteLength(v: string | Buffer | null | undefined): number {
  if (v === null || v === undefined) return 0;
  return typeof v === 'string' ? Buffer.byteLength(v) : v.length;
}

/**
 * Splits `items` in order into chunks of at most `maxBytes` (by recordBytes); a record larger than
 * `maxBytes` goes alone (the broker decides about it). No chunks for no items.
 */
export function chunkByBytes<T extends Sized>(items: readonly T[], maxBytes: number): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const item of items) {
    const n = recordBytes(item);
    if (current.length > 0 && size + n > maxBytes) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += n;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * The messages by topic, in order. A transaction's messages come in runs of one topic (the
 * snapshots, then the outputs), so a run goes on without a map lookup per message.
 */
export function byTopic<M extends { topic: string }>(messages: readonly M[]): Array<{ topic: string; messages: M[] }> {
  const topics: Array<{ topic: string; messages: M[] }> = [];
  const index = new Map<string, M[]>();
  let lastTopic: string | undefined;
  let last: M[] = [];
  for (const m of messages) {
    if (m.topic !== lastTopic) {
      lastTopic = m.topic;
      let list = index.get(m.topic);
      if (!list) {
        list = [];
        index.set(m.topic, list);
        topics.push({ topic: m.topic, messages: list });
      }
      last = list;
    }
    last.push(m);
  }
  return topics;
}

/** How many of `messages` went to each partition, by topic (one pass; partitions are small integers). */
export function countByPartition(messages: readonly { topic: string; partition?: number }[]): Map<string, number[]> {
  const counts = new Map<string, number[]>();
  let lastTopic: string | undefined;
  let last: number[] = [];
  for (const m of messages) {
    if (m.topic !== lastTopic) {
      lastTopic = m.topic;
      let c = counts.get(m.topic);
      if (!c) {
        c = [];
        counts.set(m.topic, c);
      }
      last = c;
    }
    const p = m.partition ?? -1;
    if (p >= 0) last[p] = (last[p] ?? 0) + 1;
  }
  return counts;
}
