// The raw-client baseline of bench:throughput: a plain kafkajs group consumer with `eachBatch`
// that JSON-parses every value (and sums `amount`, so the parse is not dead code), then commits
// each partition's end once everything is consumed. Timed like every contestant: from creating
// the consumer until the group's committed offsets reach the end offsets.
import { ownCpuMs } from './cpu';
import { startProgress } from './progress';
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import { benchKafka, type BenchRecordValue, deleteGroups, uniqueName } from './records';

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
  let amountSum = 0;
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
          const value = JSON.parse(message.value!.toString()) as BenchRecordValue;
          amountSum += value.amount ?? 0; // records of other shapes (the sales example's orders) parse all the same
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
        amount_sum: amountSum,
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
