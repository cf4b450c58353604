// The flow bench:throughput runs in a worker (`kafka-flow-temporal worker bench/flows/totals.ts`):
// per key, a running total of `amount` and a count of records — the same aggregation as the Kafka
// Streams anchor — persisted to Kafka in transactions every second. bench/lib/ours.ts sets the
// topic, group and flow name per run through the environment:
//   BENCH_TOPIC, BENCH_GROUP, BENCH_FLOW   (defaults: bench-totals)
//   BENCH_SNAPSHOT_TOPIC                   the Kafka backend's snapshot topic (default: the backend's)
//   BENCH_BACKEND                          'kafka' (default) or 'memory'
//   BENCH_MAX_WRITES_PER_TRANSACTION       the Kafka backend's maxWritesPerTransaction (default: the backend's)
//   BENCH_IDLE_FLUSH                       the flow's idleFlush: a duration, or 'off' (default: the flow default)
//   BENCH_RECORDS                          when set, the fold prints `BENCH FIRST_FOLD` on stdout at
//                                          its first record and `BENCH ALL_FOLDED` once it has folded
//                                          this many: the driver's steady-state start and a
//                                          fold-only finishing line (one counter per record); and
//                                          `BENCH POS <epoch ms> <partition> <next offset>` at most
//                                          every 20 ms per partition (checked every 256 records):
//                                          the folded position the commit lag is measured against
//   BENCH_OUTPUT_TOPIC, BENCH_OUTPUT_EVERY  when both are set (bench:outputs), the fold emits
//                                          `{key, n, count, total}` to the output topic for every
//                                          record whose producer index n is a multiple of
//                                          BENCH_OUTPUT_EVERY (1: every record)
//   BENCH_MAX_PENDING_OUTPUTS              the flow's maxPendingOutputs (default: the flow default)
import { defineFlow, type PersistenceOptions } from '../../index';
import type { BenchRecordValue, Totals } from '../lib/records';

const name = process.env.BENCH_FLOW ?? 'bench-totals';
const backend = process.env.BENCH_BACKEND ?? 'kafka';
const snapshotTopic = process.env.BENCH_SNAPSHOT_TOPIC;
const maxWritesPerTransaction = process.env.BENCH_MAX_WRITES_PER_TRANSACTION ? Number(process.env.BENCH_MAX_WRITES_PER_TRANSACTION) : undefined;
const idleFlush = process.env.BENCH_IDLE_FLUSH === 'off' ? false : process.env.BENCH_IDLE_FLUSH || undefined;
const expected = process.env.BENCH_RECORDS ? Number(process.env.BENCH_RECORDS) : undefined;
const outputTopic = process.env.BENCH_OUTPUT_TOPIC;
const outputEvery = outputTopic ? Number(process.env.BENCH_OUTPUT_EVERY ?? 1) : undefined;
const maxPendingOutputs = process.env.BENCH_MAX_PENDING_OUTPUTS ? Number(process.env.BENCH_MAX_PENDING_OUTPUTS) : undefined;
if (outputEvery !== undefined && !(Number.isInteger(outputEvery) && outputEvery >= 1)) {
  throw new Error(`BENCH_OUTPUT_EVERY=${process.env.BENCH_OUTPUT_EVERY}: a positive integer please`);
}

const persistence: PersistenceOptions =
  backend === 'memory'
    ? { backend: 'memory' }
    : { backend: 'kafka', transactional: true, ...(snapshotTopic ? { snapshotTopic } : {}), ...(maxWritesPerTransaction ? { maxWritesPerTransaction } : {}) };

let folded = 0;
/** Per partition: records folded, and when its position was last printed. */
const counts: number[] = [];
const printedAt: number[] = [];

function notePosition(partition: number, offset: string): void {
  const now = Date.now();
  if (now - (printedAt[partition] ?? 0) < 20) return;
  printedAt[partition] = now;
  process.stdout.write(`BENCH POS ${now} ${partition} ${Number(offset) + 1}\n`);
}

export default defineFlow<Totals, BenchRecordValue>({
  name,
  groupId: process.env.BENCH_GROUP ?? name,
  topics: [process.env.BENCH_TOPIC ?? 'bench-totals'],
  fold: (state, record, ctx) => {
    if (expected !== undefined) {
      folded++;
      if (folded === 1) process.stdout.write('BENCH FIRST_FOLD\n');
      const n = (counts[record.partition] ?? 0) + 1;
      counts[record.partition] = n;
      if ((n & 255) === 0) notePosition(record.partition, record.offset);
      if (folded === expected) process.stdout.write('BENCH ALL_FOLDED\n');
    }
    const next = { count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + record.value.amount };
    if (outputEvery !== undefined && record.value.n % outputEvery === 0) {
      ctx.emit({ topic: outputTopic!, key: record.key, value: { key: record.key, n: record.value.n, ...next } });
    }
    return next;
  },
  persistence,
  ...(outputTopic ? { outputTopics: [outputTopic] } : {}),
  ...(maxPendingOutputs !== undefined ? { maxPendingOutputs } : {}),
  timers: { persistPeriodically: { persistEvery: '1s', fireEvery: '1s' } },
  ...(idleFlush !== undefined ? { idleFlush } : {}),
});
