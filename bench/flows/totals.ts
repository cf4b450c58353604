// The flow bench:throughput runs in a worker (`kafka-flow-temporal worker bench/flows/totals.ts`):
// per key, a running total of `amount` and a count of records — the same aggregation as the Kafka
// Streams anchor — persisted to Kafka in transactions every second. bench/lib/ours.ts sets the
// topic, group and flow name per run through the environment:
//   BENCH_TOPIC, BENCH_GROUP, BENCH_FLOW   (defaults: bench-totals)
//   BENCH_SNAPSHOT_TOPIC                   the Kafka backend's snapshot topic (default: the backend's)
//   BENCH_BACKEND                          'kafka' (default) or 'memory' while a worker has no Kafka backend
import { defineFlow, type PersistenceOptions } from '../../index';
import type { BenchRecordValue, Totals } from '../lib/records';

const name = process.env.BENCH_FLOW ?? 'bench-totals';
const backend = process.env.BENCH_BACKEND ?? 'kafka';
const snapshotTopic = process.env.BENCH_SNAPSHOT_TOPIC;

const persistence: PersistenceOptions =
  backend === 'memory'
    ? { backend: 'memory' }
    : { backend: 'kafka', transactional: true, ...(snapshotTopic ? { snapshotTopic } : {}) };

export default defineFlow<Totals, BenchRecordValue>({
  name,
  groupId: process.env.BENCH_GROUP ?? name,
  topics: [process.env.BENCH_TOPIC ?? 'bench-totals'],
  fold: (state, record) => ({ count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + record.value.amount }),
  persistence,
  timers: { persistPeriodically: { persistEvery: '1s', fireEvery: '1s' } },
});
