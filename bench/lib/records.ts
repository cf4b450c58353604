// The record format every throughput benchmark uses, and a fast producer for it. Record i has the
// key `k<i % keys>` and the JSON value `{"n":i,"amount":<i % 100>}`; the contestants all fold it into
// a running total of `amount` and a count per key (bench/flows/totals.ts, the Kafka Streams anchor
// in bench/anchors/kafka-streams/).
import { randomBytes } from 'node:crypto';
import { CompressionTypes, type Kafka, logLevel, type Message } from 'kafkajs';
import { newKafka } from '../../kafka/client';
import { brokersFromEnv } from '../../config/env';
import { startProgress } from './progress';

export interface BenchRecordValue {
  n: number;
  amount: number;
}

export interface Totals {
  count: number;
  total: number;
}

export const recordKey = (i: number, keys: number): string => `k${i % keys}`;
export const recordAmount = (i: number): number => i % 100;
export const recordValue = (i: number): string => `{"n":${i},"amount":${recordAmount(i)}}`;

/** What every contestant must end with: count and total of `amount` per key. */
export function expectedTotals(records: number, keys: number): Map<string, Totals> {
  const totals = new Map<string, Totals>();
  for (let i = 0; i < records; i++) {
    const key = recordKey(i, keys);
    const t = totals.get(key);
    if (t) {
      t.count++;
      t.total += recordAmount(i);
    } else {
      totals.set(key, { count: 1, total: recordAmount(i) });
    }
  }
  return totals;
}

/** A topic, group or application id nobody else on the shared broker uses: `<prefix>-<time>-<random>`. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/** A kafkajs client for the benchmarks: quiet, brokers from KAFKA_BROKERS. */
export function benchKafka(clientId: string, brokers: string[] = brokersFromEnv()): Kafka {
  return newKafka({ brokers, clientId, logLevel: logLevel.ERROR });
}

export interface ProduceOptions {
  topic: string;
  partitions: number;
  records: number;
  keys: number;
  brokers?: string[];
  /** Messages per produce request; default 10,000. */
  chunk?: number;
  /** Produce requests in flight at once; default 4. */
  inFlight?: number;
}

/**
 * Creates `topic` with `partitions` partitions (it must not exist) and produces the records
 * 0..records-1 to it, partitioned by key with kafkajs's default (Java-compatible murmur2)
 * partitioner, so each key lives on one partition for every contestant. Returns the time taken.
 */
export async function produceRecords(options: ProduceOptions): Promise<{ ms: number }> {
  const kafka = benchKafka('bench-producer', options.brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const chunk = options.chunk ?? 10_000;
  const inFlight = options.inFlight ?? 4;
  const progress = startProgress(`produce ${options.topic}`, options.records, { plainEveryMs: 5_000 });
  const start = process.hrtime.bigint();
  try {
    await admin.connect();
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: options.topic, numPartitions: options.partitions, replicationFactor: 1 }],
    });
    if (!created) throw new Error(`topic ${options.topic} exists already: benchmarks need a fresh one`);
    await waitForLeaders(admin, options.topic, options.partitions);
    await producer.connect();
    let next = 0;
    const sendNext = async (): Promise<void> => {
      while (next < options.records) {
        const from = next;
        const to = Math.min(from + chunk, options.records);
        next = to;
        const messages: Message[] = new Array(to - from);
        for (let i = from; i < to; i++) messages[i - from] = { key: recordKey(i, options.keys), value: recordValue(i) };
        await producer.send({ topic: options.topic, messages, acks: -1, compression: CompressionTypes.None });
        progress.tick(to - from);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, () => sendNext()));
  } finally {
    progress.stop();
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
  }
  return { ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

/** Creates a fresh topic (an output topic a contestant writes to) and waits for its leaders. */
export async function createTopic(topic: string, partitions: number, brokers?: string[]): Promise<void> {
  const admin = benchKafka('bench-create-topic', brokers).admin();
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }] });
    await waitForLeaders(admin, topic, partitions);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** KRaft may answer UNKNOWN_TOPIC_OR_PARTITION for a moment after creation; wait for leaders. */
export async function waitForLeaders(admin: ReturnType<Kafka['admin']>, topic: string, partitions: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      const meta = topics[0];
      if (meta && meta.partitions.length === partitions && meta.partitions.every((p) => p.leader >= 0)) return;
    } catch {
      // not visible yet
    }
    if (Date.now() > deadline) throw new Error(`topic ${topic}: no leaders after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Deletes topics, ignoring ones already gone; never throws (cleanup runs in `finally`). */
export async function deleteTopics(topics: string[], brokers?: string[]): Promise<void> {
  if (topics.length === 0) return;
  const admin = benchKafka('bench-cleanup', brokers).admin();
  try {
    await admin.connect();
    const existing = new Set(await admin.listTopics());
    const doomed = topics.filter((t) => existing.has(t));
    if (doomed.length > 0) await admin.deleteTopics({ topics: doomed, timeout: 30_000 });
  } catch (err) {
    process.stderr.write(`warning: could not delete topics ${topics.join(', ')}: ${(err as Error).message}\n`);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Topics whose names start with `prefix` (internal topics of a Streams application, say). */
export async function topicsWithPrefix(prefix: string, brokers?: string[]): Promise<string[]> {
  const admin = benchKafka('bench-cleanup', brokers).admin();
  try {
    await admin.connect();
    return (await admin.listTopics()).filter((t) => t.startsWith(prefix));
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * Deletes consumer groups (cleanup; never throws). A group whose last member has not left yet is
 * not empty, so this retries for up to `withinMs`, then warns.
 */
export async function deleteGroups(groups: string[], brokers?: string[], withinMs = 15_000): Promise<void> {
  if (groups.length === 0) return;
  const admin = benchKafka('bench-cleanup', brokers).admin();
  const deadline = Date.now() + withinMs;
  let left = [...groups];
  try {
    await admin.connect();
    for (;;) {
      try {
        await admin.deleteGroups(left);
        return;
      } catch (err) {
        // kafkajs throws one error listing the groups it could not delete and why.
        const failed = ((err as { groups?: Array<{ groupId: string; errorCode: number }> }).groups ?? [])
          // 69 GROUP_ID_NOT_FOUND: never committed, nothing to delete
          .filter((g) => g.errorCode !== 0 && g.errorCode !== 69)
          .map((g) => g.groupId);
        if (failed.length === 0) return;
        left = failed;
        if (Date.now() > deadline) {
          process.stderr.write(`warning: could not delete groups ${left.join(', ')}: ${(err as Error).message}\n`);
          return;
        }
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  } catch (err) {
    process.stderr.write(`warning: could not delete groups ${left.join(', ')}: ${(err as Error).message}\n`);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}
