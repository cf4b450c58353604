// The raw-client baseline of bench:throughput, like for like with the flows it is compared with: a
// plain kafkajs group consumer with `eachBatch` that turns every key into a string, JSON-parses
// every value and keeps the same per-key state in a Map (a running count and total of `amount`,
// a new state object per record, as the bench flow's fold returns one), then commits each
// partition's end once everything is consumed. Timed like every contestant: from creating the
// consumer until the group's committed offsets reach the end offsets.
import { ownCpuMs } from './cpu';
import { startProgress } from './progress';
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import { benchKafka, type BenchRecordValue, deleteGroups, type Totals, uniqueName } from './records';

export interface RawOptions {
  topic: string;
  brokers?: string[];
  /** Default: a fresh group per run. */
  groupId?: string;
  timeoutMs?: number;
}

export interface ContestantResult {
  /** Wall time from start until the committed offsets reached the end. */
  ms: number;
  /** Records the finishing line covers (sum of end offsets). */
  records: number;
  /**
   * The steady-state window: from the first record processed (start-up behind it: process or JVM
   * start, group join, recovery) to the same finishing line, covering all `records`.
   */
  steady?: { ms: number; records: number; from: string; /** CPU ms the contestant's process spent in the window. */ cpuMs?: number };
  /** Anything worth keeping with the figure. */
  details?: Record<string, unknown>;
}

export async function rawKafkajsConsume(options: RawOptions): Promise<ContestantResult> {
  const end = await readEndOffsets(options.topic, options.brokers);
  const records = totalOf(end);
  const groupId = options.groupId ?? uniqueName('bench-raw');
  const timeoutMs = options.timeoutMs ?? 600_000;
  const progress = startProgress(`raw kafkajs ${options.topic}`, records, { plainEveryMs: 5_000 });

  const start = process.hrtime.bigint();
  // The same observer as for the other contestants, polling from the start (in this process here).
  let stopWatching = false;
  const reached = waitForCommittedEnd({
    groupId,
    topic: options.topic,
    end,
    brokers: options.brokers,
    timeoutMs,
    failure: () => (stopWatching ? new Error('raw consumer failed') : undefined),
  });
  reached.catch(() => undefined);
  const consumer = benchKafka('bench-raw', options.brokers).consumer({ groupId });
  let consumed = 0;
  const states = new Map<string, Totals>();
  let joinedAt: bigint | undefined;
  let firstBatchAt: bigint | undefined;
  let firstBatchCpuMs: number | undefined;
  const next = new Map<number, bigint>();
  let allConsumed!: () => void;
  const consumedAll = new Promise<void>((resolve) => {
    allConsumed = resolve;
  });
  let crashed: Error | undefined;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joinedAt ??= process.hrtime.bigint();
  });
  consumer.on(consumer.events.CRASH, (e) => {
    crashed = e.payload.error;
    allConsumed();
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic: options.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (firstBatchAt === undefined) {
          firstBatchAt = process.hrtime.bigint();
          firstBatchCpuMs = ownCpuMs();
        }
        for (const message of batch.messages) {
          const key = message.key!.toString();
          const value = JSON.parse(message.value!.toString()) as BenchRecordValue;
          const state = states.get(key);
          // records of other shapes (the sales example's orders) fold all the same
          states.set(key, { count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + (value.amount ?? 0) });
        }
        consumed += batch.messages.length;
        next.set(batch.partition, BigInt(batch.lastOffset()) + 1n);
        progress.tick(batch.messages.length);
        if (consumed >= records) allConsumed();
      },
    });
    const timeout = setTimeout(() => {
      crashed = new Error(`raw consumer: ${consumed} of ${records} records after ${timeoutMs} ms`);
      allConsumed();
    }, timeoutMs);
    await consumedAll;
    clearTimeout(timeout);
    if (crashed) throw crashed;
    const consumedAt = process.hrtime.bigint();
    await consumer.commitOffsets(
      [...next].map(([partition, offset]) => ({ topic: options.topic, partition, offset: offset.toString() })),
    );
    progress.stop();
    const { reachedAt } = await reached;
    const cpuMs = firstBatchCpuMs === undefined ? undefined : ownCpuMs() - firstBatchCpuMs;
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      steady: firstBatchAt === undefined ? undefined : { ms: Number(reachedAt - firstBatchAt) / 1e6, records, from: 'first batch handed to eachBatch', cpuMs },
      details: {
        first_batch_after_ms: firstBatchAt === undefined ? undefined : Math.round(Number(firstBatchAt - start) / 1e6),
        group_join_ms: joinedAt === undefined ? undefined : Math.round(Number(joinedAt - start) / 1e6),
        consume_ms: Math.round(Number(consumedAt - start) / 1e6),
        keys: states.size,
        amount_sum: [...states.values()].reduce((sum, t) => sum + t.total, 0),
      },
    };
  } finally {
    stopWatching = true;
    await reached.catch(() => undefined);
    progress.stop();
    await consumer.disconnect().catch(() => undefined);
    await deleteGroups([groupId], options.brokers);
  }
}
