// Temporal overhead (issue 8, item 5, and the orchestration issue's figures), on the sales example
// (examples/sales/flow.ts: running totals per store, transactional Kafka persistence):
//
// 1. example_vs_raw: one topic of orders (6 partitions, 1,000,000 orders keyed by store;
//    --quick: 100,000), consumed in the same run by the raw kafkajs baseline of bench:throughput
//    (bench/lib/raw.ts: eachBatch + JSON.parse) and by one worker of the example (persistEvery 1 s,
//    as bench:throughput runs its flow; bench/flows/sales.ts wraps the example's fold with the
//    first/last-record markers), interleaved, median of 3 (--quick: 1). Both to the same finishing
//    line, the group's committed offsets at the end; the ratio of the steady-state rates (first
//    record processed → finishing line) is example_vs_raw, the end-to-end one example_vs_raw_e2e.
//
// 2. history_events_per_partition_hour: a worker of the example with persistEvery = 1 min
//    (--quick: 5 s, and the figure scaled by 5 s / 60 s, marked as scaled) on a fresh group over the
//    same topic, under a steady 100 orders/s. Once every partition workflow is running (start-up
//    behind it), the events of each partition's history — summed over its runs, following
//    continue-as-new back through each run's first event — are counted; again after a window of
//    5 min (--quick: 40 s); the difference per partition, scaled to an hour, is the figure (goal
//    ≤ 600). continue_as_new_every_events is the workflow's limit (DEFAULT_LIMITS, or
//    KFT_MAX_HISTORY_EVENTS); continue_as_new_every_hours follows from the two.
//
// The third orchestration figure, the time from a worker's death to its partitions processing
// again on the survivor, is bench:failover's failover_ms.
// `npm run bench:orchestration [-- --quick]`.
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { CompressionTypes, type Message, Partitioners } from 'kafkajs';
import { isQuick, sized } from './lib/args';
import { deleteRunTopicsAndGroup, type FlowWorker, spawnWorker, StatusWatcher, terminateFlowWorkflows } from './lib/flow-workers';
import { runOurs } from './lib/ours';
import { startProgress } from './lib/progress';
import { type ContestantResult, rawKafkajsConsume } from './lib/raw';
import { benchKafka, deleteTopics, uniqueName } from './lib/records';
import { PACKAGE_ROOT, writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import { order } from '../examples/sales/orders';
import { brokersFromEnv, readWorkerEnv } from '../config/env';
import { DEFAULT_LIMITS, partitionWorkflowId } from '../workflows/partition-workflow';

const PARTITIONS = 6;
const ORDERS = sized(1_000_000, 100_000);
const RUNS = Number(process.env.BENCH_RUNS ?? sized(3, 1));
const PERSIST_EVERY_MS = sized(60_000, 5_000);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? sized(300_000, 40_000));
const LOAD_PER_S = 100;
const HOUR_MS = 3_600_000;
const EXAMPLE_MODULE = path.join(PACKAGE_ROOT, 'examples', 'sales', 'flow.ts');
const WRAPPED_EXAMPLE_MODULE = path.join(PACKAGE_ROOT, 'bench', 'flows', 'sales.ts');

async function main(): Promise<void> {
  const brokers = brokersFromEnv();
  const topic = uniqueName('bench-orchestration');
  const figures: Record<string, number> = {};
  const notes: Record<string, unknown> = { topic_partitions: PARTITIONS, orders: ORDERS, runs: RUNS };
  try {
    process.stdout.write(`producing ${ORDERS.toLocaleString('en-US')} orders (examples/sales/orders.ts) to ${topic} (${PARTITIONS} partitions)\n`);
    await produceOrders(topic, 0, ORDERS, brokers, true);

    // ---- 1. the example's records/s against raw kafkajs, same topic, same run --------------------
    const results: Record<'raw' | 'example', ContestantResult[]> = { raw: [], example: [] };
    for (let run = 1; run <= RUNS; run++) {
      if (RUNS > 1) process.stdout.write(`run ${run}/${RUNS}\n`);
      results.raw.push(await rawKafkajsConsume({ topic, brokers }));
      await sleep(2_000);
      results.example.push(
        await runOurs(topic, {
          brokers,
          flowModule: WRAPPED_EXAMPLE_MODULE,
          label: 'sales example',
          env: (flow, input) => ({ SALES_TOPIC: input, SALES_FLOW: flow, SALES_GROUP: flow, SALES_PERSIST_EVERY: '1s' }),
        }),
      );
      await sleep(2_000);
    }
    const rows: Row[] = [];
    const rates: Record<string, { e2e: number; steady?: number }> = {};
    for (const who of ['raw', 'example'] as const) {
      const rs = results[who];
      const e2eMs = median(rs.map((r) => r.ms));
      const windows = rs.flatMap((r) => (r.steady ? [r.steady.ms] : []));
      const steadyMs = windows.length === rs.length ? median(windows) : undefined;
      rates[who] = { e2e: Math.round(perSecond(ORDERS, e2eMs)), steady: steadyMs === undefined ? undefined : Math.round(perSecond(ORDERS, steadyMs)) };
      figures[`${who}_e2e_records_per_s`] = rates[who].e2e;
      if (rates[who].steady !== undefined) figures[`${who}_steady_records_per_s`] = rates[who].steady!;
      notes[who] = rs.map((r) => ({ ms: Math.round(r.ms), steady_ms: r.steady ? Math.round(r.steady.ms) : undefined, ...r.details }));
      rows.push({
        contestant: who === 'raw' ? 'raw kafkajs eachBatch + JSON.parse + Map' : 'sales example, one worker (Kafka transactional, persist 1 s)',
        e2e_ms: Math.round(e2eMs),
        e2e_records_per_s: rates[who].e2e,
        steady_ms: steadyMs === undefined ? '-' : Math.round(steadyMs),
        steady_records_per_s: rates[who].steady ?? '-',
      });
    }
    if (rates.example!.steady !== undefined && rates.raw!.steady !== undefined) {
      figures.example_vs_raw = Number(ratio(rates.example!.steady!, rates.raw!.steady!).toFixed(3));
    }
    figures.example_vs_raw_e2e = Number(ratio(rates.example!.e2e, rates.raw!.e2e).toFixed(3));
    printTable(`the sales example vs raw kafkajs: ${ORDERS.toLocaleString('en-US')} orders, ${PARTITIONS} partitions, median of ${RUNS}`, rows);

    // ---- 2. history events per partition-hour at persistEvery = 1 min -------------------------------
    const history = await measureHistory(topic, brokers);
    Object.assign(figures, history.figures);
    notes.history = history.notes;
  } finally {
    await deleteTopics([topic], brokers);
  }
  notes.example_vs_raw = 'steady-state rates (first record processed → committed end), as bench:throughput; example_vs_raw_e2e from each start';
  process.stdout.write(
    `example_vs_raw = ${figures.example_vs_raw ?? 'n/a'} (e2e ${figures.example_vs_raw_e2e}); history_events_per_partition_hour = ${figures.history_events_per_partition_hour}${isQuick() ? ' (scaled from persistEvery 5 s)' : ''} (goal <= 600)\n`,
  );
  const file = writeResults('orchestration', figures, { versions: { kafka: '4.3.1', temporal: 'temporal CLI dev server 1.9.1' }, notes });
  process.stdout.write(`results: ${file}\n`);
}

async function measureHistory(topic: string, brokers: string[]) {
  const flow = uniqueName('bench-orch-history');
  const worker: FlowWorker = spawnWorker('history', EXAMPLE_MODULE, {
    SALES_TOPIC: topic,
    SALES_FLOW: flow,
    SALES_GROUP: flow,
    SALES_PERSIST_EVERY: `${PERSIST_EVERY_MS}ms`,
    LOG_LEVEL: 'warn',
  });
  const watcher = await StatusWatcher.connect();
  let producing = true;
  let load: Promise<void> | undefined;
  try {
    const deadline = performance.now() + 180_000;
    while (!(await watcher.runningOn(flow, topic, PARTITIONS))) {
      if (worker.process.exitCode !== null) throw new Error(`the worker exited (${worker.process.exitCode})`);
      if (performance.now() > deadline) throw new Error('the partitions did not all reach running in 180 s');
      await sleep(500);
    }
    await sleep(3_000); // the last start-up workflow tasks (fold loop and first persist scheduled)
    load = (async () => {
      let next = ORDERS;
      const started = performance.now();
      while (producing) {
        const due = ORDERS + Math.floor(((performance.now() - started) / 1000) * LOAD_PER_S) - next;
        if (due > 0) {
          await produceOrders(topic, next, due, brokers, false);
          next += due;
        }
        await sleep(200);
      }
    })();
    const before = await countEvents(watcher.client, flow, topic);
    const statusBefore = await watcher.statuses(flow, topic, PARTITIONS);
    const t0 = performance.now();
    const progress = startProgress(`history window (persistEvery ${PERSIST_EVERY_MS / 1000} s)`, Math.round(WINDOW_MS / 1000), { plainEveryMs: 30_000 });
    while (performance.now() - t0 < WINDOW_MS) {
      if (worker.process.exitCode !== null) throw new Error(`the worker exited (${worker.process.exitCode})`);
      await sleep(Math.min(1_000, WINDOW_MS - (performance.now() - t0)));
      progress.update(Math.round((performance.now() - t0) / 1000));
    }
    progress.stop();
    const after = await countEvents(watcher.client, flow, topic);
    const statusAfter = await watcher.statuses(flow, topic, PARTITIONS);
    const windowMs = performance.now() - t0;

    const perPartition = after.map((a, p) => ({
      partition: p,
      startup_events: before[p]!.events,
      window_events: a.events - before[p]!.events,
      runs: a.runs,
      persists: (statusAfter[p]?.counters.persists ?? 0) - (statusBefore[p]?.counters.persists ?? 0),
    }));
    const windowEvents = perPartition.reduce((n, p) => n + p.window_events, 0);
    const persists = perPartition.reduce((n, p) => n + p.persists, 0);
    const measured = (windowEvents / PARTITIONS) * (HOUR_MS / windowMs);
    // Quick runs persist every 5 s: the per-cycle events are the same, 12× as often.
    const scale = PERSIST_EVERY_MS / 60_000;
    const perHour = measured * scale;
    const limit = readWorkerEnv().maxHistoryEvents ?? DEFAULT_LIMITS.maxHistoryEvents;
    printTable(
      `history events per partition over ${Math.round(windowMs / 1000)} s, persistEvery ${PERSIST_EVERY_MS / 1000} s`,
      perPartition.map((p) => ({ ...p })),
    );
    const figures: Record<string, number> = {
      history_events_per_partition_hour: Math.round(perHour),
      history_events_per_persist: persists > 0 ? Number((windowEvents / persists).toFixed(2)) : 0,
      startup_events_per_partition: Math.round(median(perPartition.map((p) => p.startup_events))),
      continue_as_new_every_events: limit,
      continue_as_new_every_hours: Number((limit / perHour).toFixed(1)),
    };
    if (scale !== 1) figures.history_events_per_partition_hour_measured = Math.round(measured);
    return {
      figures,
      notes: {
        flow: 'examples/sales/flow.ts',
        persist_every_ms: PERSIST_EVERY_MS,
        window_ms: Math.round(windowMs),
        load_orders_per_s: LOAD_PER_S,
        scaled: scale !== 1 ? `measured at persistEvery ${PERSIST_EVERY_MS} ms and multiplied by ${scale.toFixed(4)} (per-cycle events are the same; cycles per hour scale with the cadence)` : false,
        counting:
          "each partition workflow's history events summed over its runs (following continue-as-new back from the current run), counted once every partition is running and again after the window; the difference, per partition, scaled to an hour",
        partitions: perPartition,
        persists_in_window: persists,
        load_avg_1m: os.loadavg()[0],
      },
    };
  } finally {
    producing = false;
    await load?.catch(() => undefined);
    await worker.stop().catch(() => undefined);
    worker.kill();
    await watcher.close();
    await terminateFlowWorkflows(flow, topic, PARTITIONS);
    await deleteRunTopicsAndGroup(`${flow}-`, flow, brokers);
  }
}

/** Each partition's history events, summed over its runs (continue-as-new followed back). */
async function countEvents(client: Client, flow: string, topic: string): Promise<Array<{ events: number; runs: number }>> {
  return Promise.all(
    Array.from({ length: PARTITIONS }, async (_, partition) => {
      const id = partitionWorkflowId({ flow, topic, partition });
      let runId: string | undefined = (await client.workflow.getHandle(id).describe()).runId;
      let events = 0;
      let runs = 0;
      while (runId && runs < 1_000) {
        const history = await client.workflow.getHandle(id, runId).fetchHistory();
        events += history.events?.length ?? 0;
        runs++;
        runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
      }
      return { events, runs };
    }),
  );
}

/** Orders from..from+count-1 of examples/sales/orders.ts, keyed by store; creates the topic first when asked. */
async function produceOrders(topic: string, from: number, count: number, brokers: string[], create: boolean): Promise<void> {
  const kafka = benchKafka('bench-orchestration', brokers);
  const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  const progress = create ? startProgress(`produce ${topic}`, count, { plainEveryMs: 5_000 }) : undefined;
  try {
    if (create) {
      const admin = kafka.admin();
      await admin.connect();
      try {
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }] });
      } finally {
        await admin.disconnect();
      }
    }
    await producer.connect();
    let next = from;
    const end = from + count;
    const send = async () => {
      while (next < end) {
        const start = next;
        const stop = Math.min(start + 10_000, end);
        next = stop;
        const messages: Message[] = [];
        for (let i = start; i < stop; i++) {
          const o = order(i);
          messages.push({ key: o.store, value: JSON.stringify(o) });
        }
        await producer.send({ topic, messages, acks: -1, compression: CompressionTypes.None });
        progress?.tick(stop - start);
      }
    };
    await Promise.all(Array.from({ length: 4 }, send));
  } finally {
    progress?.stop();
    await producer.disconnect().catch(() => undefined);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
