// Inputs of bench:state: records of the shared format (value `{"n":i,"amount":i % 100}`, folded by
// bench/flows/totals.ts into a count and a total per key) whose keys come from a chosen
// distribution — every key once in order, uniform random, or Zipf — produced into an existing
// topic, any number of times (phase after phase), with kafkajs's default (Java murmur2)
// partitioner. The driver keeps what each key must end with (KeyTotals) to check the flows'
// persisted state against.
import { CompressionTypes, type Message } from 'kafkajs';
import { prng } from '../../chaos/schedule';
import { startProgress } from './progress';
import { benchKafka, recordAmount, recordValue, waitForLeaders } from './records';

/**
 * Zipf(s) over ranks 0..n-1: P(rank r) ∝ 1 / (r + 1)^s, by inverse transform over the cumulative
 * table (n doubles) and a binary search per draw.
 */
export class ZipfSampler {
  private readonly cdf: Float64Array;

  constructor(
    readonly n: number,
    readonly s: number,
    private readonly random: () => number,
  ) {
    this.cdf = new Float64Array(n);
    let sum = 0;
    for (let r = 0; r < n; r++) {
      sum += 1 / (r + 1) ** s;
      this.cdf[r] = sum;
    }
    for (let r = 0; r < n; r++) this.cdf[r]! /= sum;
  }

  /** The probability of the `top` most frequent ranks together. */
  headShare(top: number): number {
    return top <= 0 ? 0 : this.cdf[Math.min(top, this.n) - 1]!;
  }

  next(): number {
    const u = this.random();
    let lo = 0;
    let hi = this.n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** Key ids of a phase of input: `keyOf(i)` for its i-th record. */
export type KeyPicker = (i: number) => number;

export const sequentialKeys = (keys: number): KeyPicker => (i) => i % keys;
export const uniformKeys = (keys: number, seed: number): KeyPicker => {
  const random = prng(seed);
  return () => Math.floor(random() * keys);
};
/** Zipf(s) keys: rank r is key `k<r>` (the partitioner spreads the hot keys over the partitions). */
export const zipfKeys = (keys: number, s: number, seed: number): KeyPicker => {
  const zipf = new ZipfSampler(keys, s, prng(seed));
  return () => zipf.next();
};

export const keyName = (id: number): string => `k${id}`;

/** What every key must end with: count and total of `amount`, by key id. */
export class KeyTotals {
  readonly count: Uint32Array;
  readonly total: Float64Array;

  constructor(readonly keys: number) {
    this.count = new Uint32Array(keys);
    this.total = new Float64Array(keys);
  }

  add(id: number, amount: number): void {
    this.count[id]!++;
    this.total[id]! += amount;
  }

  /** Keys with at least one record. */
  get distinct(): number {
    let n = 0;
    for (let i = 0; i < this.keys; i++) if (this.count[i]! > 0) n++;
    return n;
  }
}

export interface ProduceKeyedOptions {
  topic: string;
  /** Index of the first record: values carry `n` = this + i, so phases after phases stay distinct. */
  from: number;
  records: number;
  keyOf: KeyPicker;
  /** Updated with every record produced. */
  expect?: KeyTotals;
  brokers?: string[];
  label?: string;
  /** Messages per produce request; default 10,000. */
  chunk?: number;
  /** Produce requests in flight at once; default 4. */
  inFlight?: number;
}

/** Creates a topic (it must not exist) and waits for its leaders. */
export async function createTopic(topic: string, partitions: number, brokers?: string[]): Promise<void> {
  const admin = benchKafka('bench-state-admin', brokers).admin();
  try {
    await admin.connect();
    const created = await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }] });
    if (!created) throw new Error(`topic ${topic} exists already: benchmarks need a fresh one`);
    await waitForLeaders(admin, topic, partitions);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Produces records from..from+records-1 of the shared format to an existing topic, keys by `keyOf`. Returns ms. */
export async function produceKeyed(o: ProduceKeyedOptions): Promise<number> {
  const producer = benchKafka('bench-state-producer', o.brokers).producer({ allowAutoTopicCreation: false });
  const chunk = o.chunk ?? 10_000;
  const inFlight = o.inFlight ?? 4;
  const progress = startProgress(o.label ?? `produce ${o.topic}`, o.records, { plainEveryMs: 10_000 });
  const started = performance.now();
  try {
    await producer.connect();
    let next = 0;
    const sendNext = async (): Promise<void> => {
      while (next < o.records) {
        const from = next;
        const to = Math.min(from + chunk, o.records);
        next = to;
        const messages: Message[] = new Array(to - from);
        for (let i = from; i < to; i++) {
          const n = o.from + i;
          const id = o.keyOf(i);
          o.expect?.add(id, recordAmount(n));
          messages[i - from] = { key: keyName(id), value: recordValue(n) };
        }
        await producer.send({ topic: o.topic, messages, acks: -1, compression: CompressionTypes.None });
        progress.tick(to - from);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, () => sendNext()));
  } finally {
    progress.stop();
    await producer.disconnect().catch(() => undefined);
  }
  return performance.now() - started;
}
