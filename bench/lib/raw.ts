// The raw-client baseline of bench:throughput, like for like with the flows it is compared with: a
// plain kafkajs group consumer with `eachBatch` that turns every key into a string, JSON-parses
// every value and keeps the same per-key state in a Map (a running count and total of `amount`,
// a new state object per record, as the bench flow's fold returns one), then commits each
// partition's end once everything is consumed. Timed like every contestant: from creating the
// consumer until the group's committed offsets reach the end offsets.
import type { KafkaMessage } from 'kafkajs';
import { machineBusyMs, ownCpuMs } from './cpu';
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

/** The steady window's start: the first batch handed to `eachBatch`, and the process's CPU then. */
export class FirstBatch {
  private at: bigint | undefined;
  private cpuMs: number | undefined;
  private machineMs: number | undefined;

  mark(): void {
    if (this.at !== undefined) return;
    this.at = process.hrtime.bigint();
    this.cpuMs = ownCpuMs();
    this.machineMs = machineBusyMs();
  }

  /** Every process's CPU since the first batch (this one's, the broker's, neighbours'), ms. */
  machineBusySinceMs(): number | undefined {
    const now = machineBusyMs();
    return this.machineMs === undefined || now === undefined ? undefined : Math.round(now - this.machineMs);
  }

  /** The steady window up to `reachedAt`, and when the first batch came after `start`. */
  window(start: bigint, reachedAt: bigint, records: number): { steady: ContestantResult['steady']; firstBatchAfterMs: number | undefined } {
    if (this.at === undefined) return { steady: undefined, firstBatchAfterMs: undefined };
    const cpuMs = this.cpuMs === undefined ? undefined : ownCpuMs() - this.cpuMs;
    return {
      steady: { ms: Number(reachedAt - this.at) / 1e6, records, from: 'first batch handed to eachBatch', cpuMs },
      firstBatchAfterMs: Math.round(Number(this.at - start) / 1e6),
    };
  }
}

/**
 * The raw loops' fold of one record: its key as a string, its JSON value parsed, a new totals
 * object for the key (records of other shapes, the sales example's orders, fold all the same).
 */
export function foldTotals(states: Map<string, Totals>, message: KafkaMessage): { key: string; value: BenchRecordValue; next: Totals } {
  const key = message.key!.toString();
  const value = JSON.parse(message.value!.toString()) as BenchRecordValue;
  const state = states.get(key);
  const next = { count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + (value.amount ?? 0) };
  states.set(key, next);
  return { key, value, next };
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
  const firstBatch = new FirstBatch();
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
        firstBatch.mark();
        for (const message of batch.messages) foldTotals(states, message);
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
    const { steady, firstBatchAfterMs } = firstBatch.window(start, reachedAt, records);
    const machineBusy = firstBatch.machineBusySinceMs();
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      steady,
      details: {
        first_batch_after_ms: firstBatchAfterMs,
        group_join_ms: joinedAt === undefined ? undefined : Math.round(Number(joinedAt - start) / 1e6),
        consume_ms: Math.round(Number(consumedAt - start) / 1e6),
        keys: states.size,
        amount_sum: [...states.values()].reduce((sum, t) => sum + t.total, 0),
        steady_machine_busy_ms: machineBusy,
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
