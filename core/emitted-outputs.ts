/**
 * A key's emitted outputs (`ctx.emit`), held until its next write as bytes, not objects.
 *
 * With an output per input record a key holds about a second's worth of outputs until its write:
 * as objects (a record, its headers, its source string, its value Buffer) every one of them was
 * copied through the young generation into the old one, garbage collection's largest share of
 * the worker's time (docs/experiments/2026-12-02-outputs-held-as-bytes.md). Here each output is encoded once, at emit time, into
 * one growable Buffer per key — exactly the bytes Kafka's v2 record format puts after a record's
 * offset delta (key, value, headers) — with three int32 per output beside it: where its bytes end,
 * its partition or its key's murmur2 hash, and its topic and how it is partitioned. The produce
 * writer (kafka/protocol/produce-writer.ts) copies each output's bytes into its record batch.
 */
import { murmur2 } from './murmur2';
import type { OutputRecord } from './persistence-types';
import * as varint from './varint';

// Bound here, not called through the import: the CommonJS esbuild compiles (bin/ts-loader.js) reads
// an imported function through a getter at every call, 20-25% of the cost of writing an output
// (measured).
const { readVarInt, sizeOfVarInt, writeVarInt } = varint;

/**
 * The header every emitted record carries: `<topic>/<partition>/<offset>/<index>` of the input
 * record whose fold emitted it (index: its emits in order, from 0). With transactional Kafka
 * persistence an output lands exactly once; with caching mode and Cassandra it lands at least
 * once, and this header is what a consumer dedupes on.
 */
export const OUTPUT_SOURCE_HEADER = 'kafka-flow-source';
const SOURCE_HEADER_BYTES = Buffer.byteLength(OUTPUT_SOURCE_HEADER);
/** The source header's name as written: its varint length, then its bytes (ASCII). */
const SOURCE_HEADER_NAME = Uint8Array.from([SOURCE_HEADER_BYTES << 1, ...Buffer.from(OUTPUT_SOURCE_HEADER, 'latin1')]);
/**
 * Strings and copies up to this long are written byte by byte in JS: a call into Node's native
 * writers (`latin1Write`, `utf8Write`, `Buffer#copy`) costs more than the loop for the ≈ 10–100
 * bytes of an output's key, value, source header and record.
 */
const SHORT = 128;
/** Bytes below which a run grows by 4 (by 2 above). */
const GROW_FAST_BELOW = 16_384;

/** `meta[3i + 2] >>> 16`: how output i is partitioned. */
export const Route = {
  /** `meta[3i + 1]` is the partition the emit named. */
  Partition: 0,
  /** `meta[3i + 1]` is the murmur2 hash of the key (Kafka's default partitioner). */
  KeyHash: 1,
  /** No key: the input partition, modulo the output topic's partition count (the key is written empty). */
  InputPartition: 2,
} as const;
export type Route = (typeof Route)[keyof typeof Route];
/** Set in `meta[3i + 2]` when the key was a Buffer (decoded back as one). */
const KEY_BUFFER = 1 << 15;
/** Set in `meta[3i + 2]` when the key was null (written empty, as the produce path always sent it). */
const KEY_NULL = 1 << 14;
const TOPIC_MASK = 0x3fff;
const SMALL_TEXT = 64; // UTF-16 code units: at most 192 UTF-8 bytes, so a one-byte length guess rarely misses

export type PendingOutput = OutputRecord | EmittedOutputs;

/** Node's Buffer string writers without the encoding dispatch of `write` (what `write` calls). */
interface StringWriters {
  latin1Write(text: string, at: number, length?: number): number;
  utf8Write(text: string, at: number, length?: number): number;
}
const writers = (buf: Buffer) => buf as unknown as StringWriters;

/** What one emit hands over, the value encoded already (text: its UTF-8 bytes are the value). */
export interface EncodedEmit {
  readonly topic: string;
  readonly key: string | Buffer | null | undefined;
  readonly value: string | Buffer | null;
  readonly headers?: Readonly<Record<string, string | Buffer>>;
  readonly partition?: number;
}

export class EmittedOutputs {
  /** Outputs held. */
  count = 0;
  /** The outputs' record bytes, `[0, used)`; output i spans `[i ? end(i - 1) : 0, end(i))`. */
  bytes: Buffer;
  used = 0;
  /** Per output: its end in `bytes`, its partition or key hash, its topic index | route << 16 | KEY_BUFFER. */
  meta: Int32Array;
  /** The topics, by index; and how many outputs each holds. */
  readonly topics: string[] = [];
  readonly topicCounts: number[] = [];

  constructor(bytes = 256, outputs = 8) {
    this.bytes = Buffer.allocUnsafe(bytes);
    this.meta = new Int32Array(outputs * 3);
  }

  static is(o: PendingOutput): o is EmittedOutputs {
    return o instanceof EmittedOutputs;
  }

  start(i: number): number {
    return i === 0 ? 0 : this.meta[3 * i - 3]!;
  }

  end(i: number): number {
    return this.meta[3 * i]!;
  }

  route(i: number): Route {
    return (this.meta[3 * i + 2]! >>> 16) as Route;
  }

  /** The partition the emit named, or the key's murmur2 hash (by `route`). */
  routeValue(i: number): number {
    return this.meta[3 * i + 1]!;
  }

  topic(i: number): string {
    return this.topics[this.meta[3 * i + 2]! & TOPIC_MASK]!;
  }

  /**
   * Encodes one output (its `kafka-flow-source` header: `<prefix><offset>/<index>`, ASCII: a topic
   * name, a partition, offsets); false, with
   * nothing written, when it is not of the shape the bytes hold (a header value neither string
   * nor Buffer, a partition not an int32 ≥ 0): the caller keeps such an output as a record.
   */
  add(o: EncodedEmit, prefix: string, offset: string, index: number): boolean {
    return this.addEmit(o.topic, o.key, o.value, o.headers, o.partition, prefix, offset, index);
  }

  /**
   * `add` with the emit's fields as arguments: what `ctx.emit` calls, so that an emit makes no
   * object of its own (one per output, with an output per input record).
   */
  addEmit(
    topic: string,
    key: string | Buffer | null | undefined,
    value: string | Buffer | null,
    headers: Readonly<Record<string, string | Buffer>> | undefined,
    partition: number | undefined,
    prefix: string,
    offset: string,
    index: number,
  ): boolean {
    let headersSize = 0;
    let headerCount = 1;
    let sourceIsOwn = false;
    if (headers !== undefined) {
      if (headers === null || typeof headers !== 'object') return false;
      for (const name in headers) {
        const v = headers[name];
        if (name === OUTPUT_SOURCE_HEADER) {
          sourceIsOwn = true; // the emit's own header of that name is replaced, in its place
          continue;
        }
        // Strings only: a Buffer value would come back as text from records().
        if (typeof v !== 'string') return false;
        headerCount++;
        headersSize += 10 + Buffer.byteLength(name) + Buffer.byteLength(v);
      }
    }
    if (partition !== undefined && !(Number.isInteger(partition) && partition >= 0 && partition <= 0x7fffffff)) return false;
    if (this.topics.length > TOPIC_MASK && !this.topics.includes(topic)) return false;
    const topicIndex = this.topicIndex(topic);

    const keyBytes = key === null || key === undefined ? 0 : typeof key === 'string' ? textBytes(key) : key.length;
    const valueBytes = value === null ? -1 : typeof value === 'string' ? (value.length < SMALL_TEXT ? -2 : Buffer.byteLength(value)) : value.length;
    const sourceBytes = prefix.length + offset.length + 1 + digits(index);
    const most =
      5 + keyBytes + 5 + (valueBytes === -2 ? 3 * (value as string).length : Math.max(valueBytes, 0)) + 5 + 10 + SOURCE_HEADER_BYTES + sourceBytes + headersSize;
    this.ensure(most);
    const buf = this.bytes;
    let at = this.used;

    at = writeVarInt(buf, at, keyBytes);
    const keyAt = at;
    if (keyBytes > 0) at = writeBytes(buf, at, key!, keyBytes);

    if (valueBytes === -1) at = writeVarInt(buf, at, -1);
    else if (valueBytes === -2) {
      // A short text: its UTF-8 bytes written after a one-byte length (< 64 bytes), moved on if longer.
      const text = value as string;
      const n = writeAscii(buf, at + 1, text) ?? writers(buf).utf8Write(text, at + 1);
      if (n < 64) {
        buf[at] = n << 1;
        at += 1 + n;
      } else {
        const lengthBytes = sizeOfVarInt(n);
        buf.copyWithin(at + lengthBytes, at + 1, at + 1 + n);
        at = writeVarInt(buf, at, n) + n;
      }
    } else {
      at = writeVarInt(buf, at, valueBytes);
      at = writeBytes(buf, at, value!, valueBytes);
    }

    at = writeVarInt(buf, at, headerCount);
    if (headers !== undefined) {
      for (const name in headers) {
        if (name === OUTPUT_SOURCE_HEADER) {
          at = this.writeSource(at, prefix, offset, sourceBytes, index);
          continue;
        }
        const v = headers[name]!;
        const nameBytes = Buffer.byteLength(name);
        at = writeVarInt(buf, at, nameBytes);
        at = writeBytes(buf, at, name, nameBytes);
        const vBytes = Buffer.byteLength(v as string);
        at = writeVarInt(buf, at, vBytes);
        at = writeBytes(buf, at, v, vBytes);
      }
    }
    if (!sourceIsOwn) at = this.writeSource(at, prefix, offset, sourceBytes, index);

    const m = this.meta;
    const j = 3 * this.count;
    m[j] = at;
    if (partition !== undefined) {
      m[j + 1] = partition;
      m[j + 2] = topicIndex | (Route.Partition << 16) | (key === null || key === undefined ? KEY_NULL : typeof key === 'string' ? 0 : KEY_BUFFER);
    } else if (key === null || key === undefined) {
      m[j + 1] = 0;
      m[j + 2] = topicIndex | (Route.InputPartition << 16);
    } else {
      m[j + 1] = murmur2(buf, keyAt, keyAt + keyBytes);
      m[j + 2] = topicIndex | (Route.KeyHash << 16) | (typeof key === 'string' ? 0 : KEY_BUFFER);
    }
    this.used = at;
    this.count++;
    this.topicCounts[topicIndex]!++;
    return true;
  }

  /** Appends `other`'s outputs (their bytes copied), after this one's. Allocates nothing unless it grows. */
  appendFrom(other: EmittedOutputs): void {
    if (other.count === 0) return;
    this.ensure(other.used, other.count);
    const base = this.used;
    const n = other.used;
    if (n <= SHORT) {
      const to = this.bytes;
      const from = other.bytes;
      for (let i = 0; i < n; i++) to[base + i] = from[i]!;
    } else other.bytes.copy(this.bytes, base, 0, n);
    const m = this.meta;
    const om = other.meta;
    // One fold's emits, usually one output to the topic of the last: its index looked up once per change of topic.
    let fromTopic = -1;
    let toTopic = -1;
    for (let i = 0; i < other.count; i++) {
      const j = 3 * (this.count + i);
      const k = 3 * i;
      m[j] = om[k]! + base;
      m[j + 1] = om[k + 1]!;
      const flags = om[k + 2]!;
      const t = flags & TOPIC_MASK;
      if (t !== fromTopic) {
        fromTopic = t;
        toTopic = this.topicIndex(other.topics[t]!);
      }
      m[j + 2] = (flags & ~TOPIC_MASK) | toTopic;
      this.topicCounts[toTopic]!++;
    }
    this.used += other.used;
    this.count += other.count;
  }

  /** The index of `topic` among this one's topics, added if new. */
  private topicIndex(topic: string): number {
    const topics = this.topics;
    for (let i = 0; i < topics.length; i++) if (topics[i] === topic) return i;
    topics.push(topic);
    this.topicCounts.push(0);
    return topics.length - 1;
  }

  /**
   * A copy (a key's new run): a run whose outputs landed (`releaseOutputs`) if one is spare, grown
   * already; else one sized to hold these outputs and a few more.
   */
  copy(): EmittedOutputs {
    let c = spare.pop();
    if (c !== undefined) spareBytes -= c.bytes.length;
    else c = new EmittedOutputs(Math.max(256, this.used * 2), Math.max(8, this.count * 2));
    c.appendFrom(this);
    return c;
  }

  /** Empties it (a fold context's scratch, between records); its topics stay known, their counts 0. */
  reset(): void {
    this.count = 0;
    this.used = 0;
    // Not `length = 0` (a runtime call per record): a topic with no outputs is skipped where counted.
    for (let t = 0; t < this.topicCounts.length; t++) this.topicCounts[t] = 0;
  }

  /** The outputs decoded as records (for senders that are not Kafka's produce writer, and tests). */
  records(): OutputRecord[] {
    const out: OutputRecord[] = [];
    const buf = this.bytes;
    for (let i = 0; i < this.count; i++) {
      const r = { at: this.start(i) };
      const flags = this.meta[3 * i + 2]!;
      const route = this.route(i);
      const keyBytes = readVarInt(buf, r);
      const keyRaw = keyBytes < 0 ? null : buf.subarray(r.at, r.at + keyBytes);
      r.at += Math.max(keyBytes, 0);
      const valueBytes = readVarInt(buf, r);
      const value = valueBytes < 0 ? null : Buffer.from(buf.subarray(r.at, r.at + valueBytes));
      r.at += Math.max(valueBytes, 0);
      const headers: Record<string, string | Buffer> = {};
      const headerCount = readVarInt(buf, r);
      for (let h = 0; h < headerCount; h++) {
        const n = readVarInt(buf, r);
        const name = buf.toString('utf8', r.at, r.at + n);
        r.at += n;
        const v = readVarInt(buf, r);
        headers[name] = buf.toString('utf8', r.at, r.at + v);
        r.at += v;
      }
      const key = route === Route.InputPartition || (flags & KEY_NULL) !== 0 ? null : (flags & KEY_BUFFER) !== 0 ? Buffer.from(keyRaw!) : keyRaw!.toString('utf8');
      out.push({
        kind: 'emitted',
        topic: this.topic(i),
        ...(route === Route.Partition ? { partition: this.routeValue(i) } : {}),
        key,
        value,
        headers,
      });
    }
    return out;
  }

  private writeSource(at: number, prefix: string, offset: string, sourceBytes: number, index: number): number {
    const buf = this.bytes;
    const name = SOURCE_HEADER_NAME;
    for (let i = 0; i < name.length; i++) buf[at++] = name[i]!;
    at = writeVarInt(buf, at, sourceBytes);
    // The prefix (a topic name: ASCII, as Kafka allows) and the offset's digits.
    for (let i = 0; i < prefix.length; i++) buf[at++] = prefix.charCodeAt(i);
    for (let i = 0; i < offset.length; i++) buf[at++] = offset.charCodeAt(i);
    buf[at++] = 0x2f; // '/'
    if (index < 10) buf[at++] = 0x30 + index;
    else at += writers(buf).latin1Write(String(index), at);
    return at;
  }

  private ensure(more: number, outputs = 1): void {
    const need = this.used + more;
    const length = this.bytes.length;
    if (need > length) {
      // A key's run grows from 256 bytes to its second's worth of outputs (a few KB with an output
      // per record): by 4 while small, so it is copied twice on the way rather than four times.
      const grown = Buffer.allocUnsafe(Math.max(need, length < GROW_FAST_BELOW ? length * 4 : length * 2));
      this.bytes.copy(grown, 0, 0, this.used);
      this.bytes = grown;
    }
    const metaNeed = 3 * (this.count + outputs);
    const metaLength = this.meta.length;
    if (metaNeed > metaLength) {
      const grown = new Int32Array(Math.max(metaNeed, metaLength < GROW_FAST_BELOW / 8 ? metaLength * 4 : metaLength * 2));
      const meta = this.meta;
      const n = 3 * this.count;
      for (let i = 0; i < n; i++) grown[i] = meta[i]!;
      this.meta = grown;
    }
  }
}

/**
 * Runs whose outputs landed, emptied, for keys' next runs. With an output per record every key
 * starts a run after each of its writes (about a second's outputs: a few KB, grown from 256
 * bytes), and making and growing them — a Buffer, its meta, the copies — cost more per output
 * than writing the output's bytes. At most SPARE_MAX_BYTES of them (a process's, all partitions).
 */
const spare: EmittedOutputs[] = [];
let spareBytes = 0;
const SPARE_MAX_BYTES = 16 * 1024 * 1024;
/** A run larger than this is left to the garbage collector. */
const SPARE_MAX_RUN = 64 * 1024;

/**
 * The outputs of a write that landed: their runs may be reused for later emits. Only for outputs
 * nothing refers to any more — taken off their key, produced, their write done (a write that did
 * not land gives them back to their key instead).
 */
export function releaseOutputs(items: readonly PendingOutput[] | undefined): void {
  if (items === undefined) return;
  for (const o of items) {
    if (!(o instanceof EmittedOutputs)) continue;
    const size = o.bytes.length;
    if (size > SPARE_MAX_RUN || spareBytes + size > SPARE_MAX_BYTES) continue;
    o.reset();
    spareBytes += size;
    spare.push(o);
  }
}

/** Outputs in a key's list (an EmittedOutputs counts its outputs). */
export function outputCount(items: readonly PendingOutput[] | undefined): number {
  if (items === undefined) return 0;
  let n = 0;
  for (const o of items) n += o instanceof EmittedOutputs ? o.count : 1;
  return n;
}

/**
 * Adds `items` (one fold's emits: a fold context's scratch EmittedOutputs, whose bytes are copied,
 * and records) to a key's list: emitted bytes go on the list's last EmittedOutputs if it is last,
 * so a key holds one Buffer for a run of emits however many there are.
 */
export function appendOutputs(list: PendingOutput[] | undefined, items: readonly PendingOutput[]): PendingOutput[] {
  const out = list ?? [];
  for (const o of items) {
    if (o instanceof EmittedOutputs) {
      if (o.count === 0) continue;
      const last = out[out.length - 1];
      if (last instanceof EmittedOutputs) last.appendFrom(o);
      else out.push(o.copy());
    } else {
      out.push(o);
    }
  }
  return out;
}

/** The outputs as records (EmittedOutputs decoded), for senders that take records. */
export function outputRecords(items: readonly PendingOutput[]): OutputRecord[] {
  const out: OutputRecord[] = [];
  for (const o of items) {
    if (o instanceof EmittedOutputs) for (const r of o.records()) out.push(r);
    else out.push(o);
  }
  return out;
}

function digits(n: number): number {
  return n < 10 ? 1 : String(n).length;
}

function writeBytes(buf: Buffer, at: number, v: string | Buffer, n: number): number {
  if (typeof v !== 'string') v.copy(buf, at);
  else if (n === v.length) {
    // All ASCII (one UTF-8 byte per UTF-16 unit).
    if (n <= SHORT) for (let i = 0; i < n; i++) buf[at + i] = v.charCodeAt(i);
    else writers(buf).latin1Write(v, at, n);
  }
  else writers(buf).utf8Write(v, at, n);
  return at + n;
}

/** A text's UTF-8 byte length: counted in JS for a short ASCII text, else by Node. */
function textBytes(text: string): number {
  const n = text.length;
  if (n > SHORT) return Buffer.byteLength(text);
  for (let i = 0; i < n; i++) if (text.charCodeAt(i) >= 0x80) return Buffer.byteLength(text);
  return n;
}

/**
 * Writes a short all-ASCII text at `at` (its UTF-8 bytes are its char codes); returns its length,
 * or undefined (what was written is to be overwritten) when it is long or not all ASCII.
 */
function writeAscii(buf: Buffer, at: number, text: string): number | undefined {
  const n = text.length;
  if (n > SHORT) return undefined;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return undefined;
    buf[at + i] = c;
  }
  return n;
}
