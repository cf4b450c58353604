// Scale on paper, from measurement (issue 33): what one partition costs the Temporal server, the
// Kafka broker and a worker process, measured here so docs/scale.md can project 10,000 partitions
// over 100 workers from it.
//
// The sales example (examples/sales/flow.ts: totals per store, transactional Kafka persistence,
// alerts and sessions emitted in the store's snapshot transaction, an event-time key timer per
// store) with persistEvery = 1 min — defineFlow's and kafka-flow's default — and every other
// setting the example's or the default (idleFlush 250 ms, fireEvery 1 s, flushOnRevoke); 4 worker
// processes on one input topic of 192 partitions (--quick: 48), a steady 200 orders/s (--quick:
// 50; about one order per partition per second either way) over 10 stores a partition (the
// example's orders, each given one of PARTITIONS × 10 stores as its store and key, so that every
// partition has keys), in a Temporal namespace of the run's own. Once every partition workflow
// runs (on all 4 workers; read from the visibility store) and a warm-up has passed, a window of
// 5 min (--quick: 60 s), and per partition and minute over it:
//   temporal_server_cpu_ms_per_partition_minute   the dev server's CPU (/proc/<pid>/stat) times the
//                                                 run namespace's share of its store requests
//   workflow_tasks_per_partition_minute           WorkflowTaskCompleted events in the window
//   activity_tasks_per_partition_minute           activity tasks closed (completed, failed, timed
//                                                 out, cancelled) in the window
//   activity_heartbeats_per_partition_minute      RecordActivityTaskHeartbeat requests the server
//                                                 answered (its own metrics; not in histories)
//   history_events_per_partition_hour             every event in the window, scaled to an hour
//   worker_rss_mb, worker_rss_mb_per_partition    /proc/<pid>/status VmRSS, mean over the window
//   kafka_transactions_per_partition_minute       snapshot transactions committed (workers' /metrics)
//   snapshot_records_per_partition_minute         snapshot records written (= keys persisted)
// and more (the server's frontend requests and history-store writes, the broker's CPU, the
// workers' CPU); events are counted from the partition workflows' histories by event time, over
// every run that reaches into the window (continue-as-new followed back). Then two rebalances:
// a fifth worker joins, then leaves gracefully (SIGTERM); the time until every partition runs on
// the workers there are (a partition that kept its member in its generation, one that moved in a
// newer one) is rebalance_join_ms / rebalance_leave_ms, with the history events each cost per partition. Topics, group, workflows and namespace are removed at the end.
// `npm run bench:scale [-- --quick]`; BENCH_PARTITIONS, BENCH_WORKERS, BENCH_RATE, BENCH_WINDOW_MS,
// BENCH_WORKER_LOG (a file for the workers' log lines).
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { Partitioners } from 'kafkajs';
import { order } from '../examples/sales/orders';
import { brokersFromEnv, formatHostPort, readEnv } from '../config/env';
import { freshNamespace } from '../test/support/servers';
import { partitionWorkflowId } from '../workflows/partition-workflow';
import { freePort } from '../workers/observability/metrics-server';
import { isQuick, sized } from './lib/args';
import { localBrokerPid, processCpuMs, processMemoryMb } from './lib/cpu';
import {
  endFlowRun,
  eventually,
  type FlowRun,
  type FlowWorker,
  type LoadMessage,
  type VisiblePartition,
  runMain,
  SteadyLoad,
  sleep,
  spawnWorker,
  StatusWatcher,
} from './lib/flow-workers';
import { eventsByType, historyEventsBetween, type WindowEvents } from './lib/histories';
import { type Sample, scrapeMetrics, sumBy, sumOf } from './lib/prometheus';
import { startProgress } from './lib/progress';
import { benchKafka, uniqueName } from './lib/records';
import { PACKAGE_ROOT, productCommit, writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { localTemporalPid, temporalMetricsUrl } from './lib/temporal-server';
import { median } from './lib/timing';

const FLOW_MODULE = path.join(PACKAGE_ROOT, 'examples', 'sales', 'flow.ts');
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? sized(192, 48));
const WORKERS = Number(process.env.BENCH_WORKERS ?? 4);
const RATE = Number(process.env.BENCH_RATE ?? sized(200, 50));
const STORES = PARTITIONS * 10;
const PERSIST_EVERY = '1 min';
const WARM_UP_MS = sized(60_000, 20_000);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? sized(300_000, 60_000));
const SAMPLE_EVERY_MS = 10_000;
/** Before the workers start: the servers' CPU without this run, subtracted from the window's. */
const BASELINE_MS = sized(60_000, 20_000);
const START_DEADLINE_MS = 600_000;
const REBALANCE_DEADLINE_MS = sized(600_000, 180_000);

/** Order n of the example's generator, its store one of STORES (the key: every partition gets some). */
const salesOrder: LoadMessage = (n) => {
  const store = `store-${n % STORES}`;
  return { key: store, value: JSON.stringify({ ...order(n), store }) };
};

/** Everything read at one end of the window. */
interface Reading {
  /** Epoch ms (history event times are compared with it) and performance.now(). */
  at: number;
  perf: number;
  serverCpuMs?: number;
  brokerCpuMs?: number;
  workerCpuMs: Array<number | undefined>;
  server: Sample[];
  workers: Sample[][];
}

/** The server's metrics the figures use (its /metrics text runs to tens of MB: a label set per task queue). */
const SERVER_METRICS = new Set(['service_requests', 'persistence_requests', 'persistence_latency_sum', 'persistence_latency_count']);

async function read(temporalPid: number | undefined, brokerPid: number | undefined, serverUrl: string | undefined, pids: number[], ports: number[]): Promise<Reading> {
  const [server, workers] = await Promise.all([
    serverUrl
      ? scrapeMetrics(serverUrl, 30_000, SERVER_METRICS).catch((err: Error) => {
          process.stderr.write(`warning: the Temporal server's /metrics did not answer: ${err.message}\n`);
          return [];
        })
      : Promise.resolve([]),
    Promise.all(ports.map((port) => scrapeMetrics(`http://127.0.0.1:${port}/metrics`).catch(() => []))),
  ]);
  return {
    at: Date.now(),
    perf: performance.now(),
    serverCpuMs: processCpuMs(temporalPid),
    brokerCpuMs: processCpuMs(brokerPid),
    workerCpuMs: pids.map((pid) => processCpuMs(pid)),
    server,
    workers,
  };
}

/**
 * A server counter between two readings, per operation, for the samples matching `labels`:
 * `service_requests` (gRPC requests by service) or `persistence_requests` (the store's).
 */
function serverOperations(before: Reading, after: Reading, metric: string, labels: Record<string, string>): Record<string, number> {
  const was = sumBy(before.server, metric, 'operation', labels);
  const out: Record<string, number> = {};
  for (const [op, n] of Object.entries(sumBy(after.server, metric, 'operation', labels))) {
    if (n - (was[op] ?? 0) > 0) out[op] = n - (was[op] ?? 0);
  }
  return out;
}

/** A worker counter summed over the workers, after minus before (the workers still running at `after`). */
function workersDelta(before: Reading, after: Reading, name: string, labels: Record<string, string> = {}): number {
  return after.workers.reduce((n, samples, i) => n + sumOf(samples, name, labels) - sumOf(before.workers[i] ?? [], name, labels), 0);
}

const cpuDelta = (from: number | undefined, to: number | undefined): number | undefined => (from === undefined || to === undefined ? undefined : to - from);

/** Each partition's history events between `fromMs` and `toMs`, a few partitions at a time. */
async function partitionEvents(watcher: StatusWatcher, flow: string, fromMs: number, toMs: number): Promise<WindowEvents[]> {
  const out: WindowEvents[] = [];
  for (let p = 0; p < PARTITIONS; p += 16) {
    const batch = Array.from({ length: Math.min(16, PARTITIONS - p) }, (_, j) =>
      historyEventsBetween(watcher.client, partitionWorkflowId({ flow, topic: flow, partition: p + j }), fromMs, toMs),
    );
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

const round = (n: number, digits = 2): number => Number(n.toFixed(digits));

/** Where the partitions stood (a rebalance that did not settle): count by phase, owners, and how many are past `generation`. */
function summarize(partitions: ReadonlyArray<VisiblePartition>, generation: number) {
  const phases: Record<string, number> = {};
  for (const p of partitions) phases[p.phase ?? 'none'] = (phases[p.phase ?? 'none'] ?? 0) + 1;
  return {
    phases,
    owners: new Set(partitions.map((p) => p.owner)).size,
    past_generation: partitions.filter((p) => (p.generation ?? -1) > generation).length,
    visible: partitions.length,
  };
}

/** Removes the run's namespace (the dev server deletes its workflows in the background). */
async function deleteNamespace(namespace: string): Promise<void> {
  const connection = await Connection.connect({ address: formatHostPort(readEnv().temporalAddress) });
  try {
    await connection.operatorService.deleteNamespace({ namespace });
  } catch (err) {
    process.stderr.write(`warning: could not delete namespace ${namespace}: ${(err as Error).message}\n`);
  } finally {
    await connection.close();
  }
}

async function main(): Promise<void> {
  const brokers = brokersFromEnv();
  const id = uniqueName('bench-scale');
  const measured = productCommit();
  const loadAtStart = os.loadavg()[0] ?? 0;
  const kafka = benchKafka('bench-scale', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const run: FlowRun = { id, partitions: PARTITIONS, brokers, workers: [], admin, producer };
  const temporalPid = localTemporalPid(PACKAGE_ROOT);
  const brokerPid = localBrokerPid(PACKAGE_ROOT);
  const serverUrl = await temporalMetricsUrl(temporalPid);
  if (temporalPid === undefined) process.stderr.write('warning: no local Temporal server pid (.cache/data/run/temporal.pid): no server CPU figure\n');
  if (serverUrl === undefined) process.stderr.write('warning: the Temporal server serves no /metrics found: no heartbeat or request figures\n');
  const perWorker = PARTITIONS / WORKERS;
  process.stdout.write(
    `scale: the sales example, ${PARTITIONS} partitions over ${WORKERS} workers (${perWorker} each), ${RATE} orders/s over ${STORES} stores, persistEvery ${PERSIST_EVERY}, window ${WINDOW_MS / 1000} s\n`,
  );
  // A namespace of its own: the workflow task queue is shared by every flow's workers in a
  // namespace (in `default`, other checkouts' and tests' partition workflows would be run by these
  // workers, and theirs by others'), and the server's metrics are labelled by namespace. Set before
  // anything connects: the workers, the watcher and the clean-up read TEMPORAL_NAMESPACE.
  const namespace = await freshNamespace('bench-scale');
  process.env.TEMPORAL_NAMESPACE = namespace;
  // …as the server's metrics label it (a label value's characters outside [A-Za-z0-9_] become _).
  const nsLabel = namespace.replace(/[^A-Za-z0-9_]/g, '_');
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();

    // ---- baseline: the servers' CPU before this run's workers exist ------------------------------
    const baselineFrom = await read(temporalPid, brokerPid, undefined, [], []);
    await sleep(BASELINE_MS);
    const baselineTo = await read(temporalPid, brokerPid, undefined, [], []);
    const baselineMs = baselineTo.perf - baselineFrom.perf;
    const serverBaselineCpu = cpuDelta(baselineFrom.serverCpuMs, baselineTo.serverCpuMs);
    const brokerBaselineCpu = cpuDelta(baselineFrom.brokerCpuMs, baselineTo.brokerCpuMs);

    // ---- start: every partition running, on every worker ------------------------------------------
    const ports: number[] = [];
    const spawn = async () => {
      const port = await freePort();
      ports.push(port);
      const env = {
        SALES_TOPIC: id,
        SALES_FLOW: id,
        SALES_GROUP: id,
        SALES_ALERTS_TOPIC: `${id}-alerts`,
        SALES_SESSIONS_TOPIC: `${id}-sessions`,
        SALES_PERSIST_EVERY: PERSIST_EVERY,
        KFT_METRICS_PORT: String(port),
        LOG_LEVEL: 'warn',
      };
      const worker = spawnWorker(`w${run.workers.length + 1}`, FLOW_MODULE, env, process.env.BENCH_WORKER_LOG);
      run.workers.push(worker);
      return worker;
    };
    const startedAt = performance.now();
    for (let i = 0; i < WORKERS; i++) await spawn();
    const watcher = await StatusWatcher.connect();
    run.watcher = watcher;
    // Watched through the visibility store: a status query per partition every 250 ms kept the
    // workers of 192 partitions on 2 cores too busy to settle in 300 s.
    const startGenerations = await eventually(
      `all ${PARTITIONS} partitions running on ${WORKERS} workers`,
      () => watcher.runningByVisibility(id, PARTITIONS, WORKERS),
      START_DEADLINE_MS,
      run.workers,
    );
    const startupMs = performance.now() - startedAt;
    process.stdout.write(`every partition running on ${WORKERS} workers after ${(startupMs / 1000).toFixed(1)} s; load on, warm-up ${WARM_UP_MS / 1000} s\n`);

    // ---- the window -------------------------------------------------------------------------------
    const input = new SteadyLoad(producer, id, RATE, STORES, salesOrder);
    run.input = input;
    const alive = () => {
      for (const w of run.workers) if (w.process.exitCode !== null) throw new Error(`worker ${w.name} exited (${w.process.exitCode})`);
    };
    const warmUpEnd = performance.now() + WARM_UP_MS;
    while (performance.now() < warmUpEnd) {
      alive();
      await sleep(500);
    }
    const pids = run.workers.map((w) => w.process.pid!);
    const before = await read(temporalPid, brokerPid, serverUrl, pids, ports);
    const producedBefore = input.produced;
    const rss: number[][] = pids.map(() => []);
    const sampleRss = () => {
      for (const [i, pid] of pids.entries()) rss[i]!.push(processMemoryMb(pid)?.rss ?? Number.NaN);
    };
    sampleRss();
    const progress = startProgress(`window (${PARTITIONS} partitions, ${WORKERS} workers)`, Math.round(WINDOW_MS / 1000), { plainEveryMs: 30_000 });
    let nextSample = before.perf + SAMPLE_EVERY_MS;
    while (performance.now() - before.perf < WINDOW_MS) {
      alive();
      await sleep(Math.min(500, WINDOW_MS - (performance.now() - before.perf)));
      if (performance.now() >= nextSample) {
        nextSample += SAMPLE_EVERY_MS;
        sampleRss();
      }
      progress.update(Math.round((performance.now() - before.perf) / 1000));
    }
    progress.stop();
    sampleRss();
    const after = await read(temporalPid, brokerPid, serverUrl, pids, ports);
    const produced = input.produced - producedBefore;
    const windowMs = after.at - before.at;
    const partitionMinutes = (PARTITIONS * windowMs) / 60_000;
    const perPartitionMinute = (n: number) => round(n / partitionMinutes, 3);
    process.stdout.write(`window over: ${(windowMs / 1000).toFixed(1)} s, ${produced} orders produced; reading ${PARTITIONS} histories\n`);

    const events = await partitionEvents(watcher, id, before.at, after.at);
    const types = eventsByType(events);
    const type = (...names: string[]) => names.reduce((n, t) => n + (types[t] ?? 0), 0);
    const totalEvents = events.reduce((n, e) => n + e.events, 0);
    const workflowTasks = type('WORKFLOW_TASK_COMPLETED');
    const activityTasks = type('ACTIVITY_TASK_COMPLETED', 'ACTIVITY_TASK_FAILED', 'ACTIVITY_TASK_TIMED_OUT', 'ACTIVITY_TASK_CANCELED');
    const activitiesScheduled = type('ACTIVITY_TASK_SCHEDULED');
    const timers = type('TIMER_STARTED');
    const signals = type('WORKFLOW_EXECUTION_SIGNALED');
    const runsStarted = type('WORKFLOW_EXECUTION_STARTED');
    const upserts = type('UPSERT_WORKFLOW_SEARCH_ATTRIBUTES');
    // The server's figures only if both readings have its metrics.
    const serverMetrics = before.server.length > 0 && after.server.length > 0;
    const frontend = serverOperations(before, after, 'service_requests', { namespace: nsLabel, service_name: 'frontend' });
    const heartbeats = frontend.RecordActivityTaskHeartbeat ?? 0;
    const frontendTotal = Object.values(frontend).reduce((a, b) => a + b, 0);
    const frontendNonPoll = Object.entries(frontend).reduce((n, [op, v]) => (op.startsWith('Poll') ? n : n + v), 0);
    const historyStore = serverOperations(before, after, 'persistence_requests', { namespace: nsLabel, service_name: 'history' });
    const historyWrites = Object.entries(historyStore).reduce((n, [op, v]) => (/^(Update|Create|Append|ConflictResolve|Set)/.test(op) && !op.startsWith('UpdateShard') ? n + v : n), 0);
    const serverCpu = cpuDelta(before.serverCpuMs, after.serverCpuMs);
    const brokerCpu = cpuDelta(before.brokerCpuMs, after.brokerCpuMs);
    const workerCpu = pids.map((_, i) => cpuDelta(before.workerCpuMs[i], after.workerCpuMs[i]));
    const workerRssMean = rss.map((s) => s.filter(Number.isFinite).reduce((a, b) => a + b, 0) / Math.max(1, s.filter(Number.isFinite).length));
    const rssMb = workerRssMean.reduce((a, b) => a + b, 0) / workerRssMean.length;
    const transactions = workersDelta(before, after, 'kafka_flow_snapshot_transactions_total', { outcome: 'committed' });
    const snapshotRecords = workersDelta(before, after, 'kafka_flow_snapshot_records_total');
    const persists = workersDelta(before, after, 'kafka_flow_persists_total');
    const persistedKeys = workersDelta(before, after, 'kafka_flow_persisted_keys_total');
    const folded = workersDelta(before, after, 'kafka_flow_records_folded_total');
    const outputs = workersDelta(before, after, 'kafka_flow_outputs_total');
    // Records behind at the end of the window, all partitions: a machine that cannot keep up shows here.
    const lagAtEnd = after.workers.reduce((n, samples) => n + sumOf(samples, 'kafka_flow_lag_records'), 0);
    const persistReasons: Record<string, number> = {};
    for (const reason of ['periodic', 'idle', 'outputs', 'revoke', 'shutdown']) {
      const n = workersDelta(before, after, 'kafka_flow_persists_total', { reason });
      if (n > 0) persistReasons[reason] = n;
    }

    const figures: Record<string, number> = {};
    // The servers' CPU of this run: the window's minus what they spent at the baseline's rate
    // (another checkout's tests or benchmarks on the same servers, the servers' own idle work).
    const net = (cpu: number | undefined, baseline: number | undefined) =>
      cpu === undefined || baseline === undefined ? undefined : Math.max(0, cpu - (baseline * windowMs) / baselineMs);
    const serverNetCpu = net(serverCpu, serverBaselineCpu);
    const brokerNetCpu = net(brokerCpu, brokerBaselineCpu);
    // The server's CPU in the window times this run's share of its store requests (all services):
    // what the run's workflows cost it whatever other namespaces did meanwhile (on a shared server
    // the baseline's rate is no guide — others' load moves by 2× within minutes).
    const storeRequests = (labels: Record<string, string>) => sumOf(after.server, 'persistence_requests', labels) - sumOf(before.server, 'persistence_requests', labels);
    const storeShare = serverMetrics ? storeRequests({ namespace: nsLabel }) / Math.max(1, storeRequests({})) : undefined;
    const serverRunCpu = serverCpu === undefined || storeShare === undefined ? undefined : serverCpu * storeShare;
    if (serverRunCpu !== undefined) figures.temporal_server_cpu_ms_per_partition_minute = perPartitionMinute(serverRunCpu);
    figures.workflow_tasks_per_partition_minute = perPartitionMinute(workflowTasks);
    figures.activity_tasks_per_partition_minute = perPartitionMinute(activityTasks);
    figures.timers_per_partition_minute = perPartitionMinute(timers);
    figures.signals_per_partition_minute = perPartitionMinute(signals);
    if (serverMetrics) figures.activity_heartbeats_per_partition_minute = perPartitionMinute(heartbeats);
    // Issue 33's assumption: actions ≈ workflow tasks + activity tasks + timers + signals.
    figures.temporal_actions_per_partition_minute = perPartitionMinute(workflowTasks + activityTasks + timers + signals);
    // Temporal Cloud's own list (docs/scale.md): activities started, heartbeats recorded, timers,
    // signals, search-attribute upserts and workflows started (continue-as-new); workflow tasks are
    // not actions there (queries are, but none is made in the window).
    if (serverMetrics) figures.temporal_cloud_actions_per_partition_minute = perPartitionMinute(activitiesScheduled + heartbeats + timers + signals + upserts + runsStarted);
    if (serverMetrics) figures.temporal_frontend_requests_per_partition_minute = perPartitionMinute(frontendTotal);
    if (serverMetrics) figures.temporal_frontend_requests_non_poll_per_partition_minute = perPartitionMinute(frontendNonPoll);
    if (serverMetrics) figures.temporal_history_store_writes_per_partition_minute = perPartitionMinute(historyWrites);
    // The mean time of the store's UpdateWorkflowExecution in the window: a history shard makes its
    // writes one at a time, so 1000 / this is what one shard can take per second on this store.
    const updates = ['sum', 'count'].map((k) =>
      ['before', 'after'].map((w) => sumOf((w === 'before' ? before : after).server, `persistence_latency_${k}`, { namespace: nsLabel, operation: 'UpdateWorkflowExecution' })),
    );
    const updateCount = updates[1]![1]! - updates[1]![0]!;
    if (updateCount > 0) figures.temporal_history_store_update_ms = round(((updates[0]![1]! - updates[0]![0]!) * 1000) / updateCount, 3);
    figures.history_events_per_partition_hour = round((totalEvents / partitionMinutes) * 60, 1);
    figures.worker_rss_mb = round(rssMb, 1);
    figures.worker_rss_mb_per_partition = round(rssMb / perWorker, 2);
    const workerCpuTotal = workerCpu.reduce<number>((a, b) => a + (b ?? 0), 0);
    figures.worker_cpu_ms_per_partition_minute = perPartitionMinute(workerCpuTotal);
    if (brokerNetCpu !== undefined) figures.kafka_broker_cpu_ms_per_partition_minute = perPartitionMinute(brokerNetCpu);
    figures.records_per_partition_minute = perPartitionMinute(folded);
    figures.kafka_transactions_per_partition_minute = perPartitionMinute(transactions);
    figures.snapshot_records_per_partition_minute = perPartitionMinute(snapshotRecords);
    figures.persists_per_partition_minute = perPartitionMinute(persists);

    const perPartitionEvents = events.map((e) => e.events);
    const notes: Record<string, unknown> = {
      quick: isQuick() ? `quick run: ${PARTITIONS} partitions over ${WORKERS} workers, ${RATE} orders/s, a ${WINDOW_MS / 1000} s window — too short for figures worth quoting` : false,
      flow: 'examples/sales/flow.ts (transactional Kafka persistence; alerts and sessions topics; event-time key timer per store)',
      persist_every: `${PERSIST_EVERY} (defineFlow's default); idleFlush 250 ms (default), fireEvery 1 s and flushOnRevoke as the example sets them`,
      partitions: PARTITIONS,
      workers: WORKERS,
      partitions_per_worker: perWorker,
      load_orders_per_s: RATE,
      stores: STORES,
      warm_up_ms: WARM_UP_MS,
      window_ms: Math.round(windowMs),
      startup_ms: Math.round(startupMs),
      group_generation_at_start: Math.max(...startGenerations),
      orders_produced_in_window: produced,
      records_folded_in_window: folded,
      outputs_in_window: outputs,
      lag_records_at_end_of_window: lagAtEnd,
      persists_in_window_by_reason: persistReasons,
      persisted_keys_in_window: persistedKeys,
      transactions_in_window: transactions,
      snapshot_records_in_window: snapshotRecords,
      history_events_in_window: totalEvents,
      history_events_by_type: types,
      history_events_per_partition: { min: Math.min(...perPartitionEvents), median: median(perPartitionEvents), max: Math.max(...perPartitionEvents) },
      history_runs_read: events.reduce((n, e) => n + e.runs, 0),
      temporal_frontend_requests: frontend,
      temporal_history_store_requests: historyStore,
      namespace,
      cpu_baseline: {
        how: `the servers' CPU over ${Math.round(baselineMs / 1000)} s before the workers started, at that rate subtracted from the window's`,
        temporal_server_cpu_ms: serverBaselineCpu,
        kafka_broker_cpu_ms: brokerBaselineCpu,
      },
      temporal_server_cpu_ms: {
        window: serverCpu,
        net_of_baseline: serverNetCpu,
        store_request_share: storeShare === undefined ? undefined : round(storeShare, 3),
        this_run: serverRunCpu,
        figure: 'this_run: the window’s CPU × the run namespace’s share of the server’s store requests',
      },
      temporal_server_cores: serverRunCpu === undefined ? undefined : round(serverRunCpu / windowMs, 3),
      kafka_broker_cpu_ms: { window: brokerCpu, net: brokerNetCpu },
      worker_cpu_ms: workerCpu,
      worker_rss_mb_samples: rss,
      counting:
        'history events by event time in the window, over every run of a partition workflow that reaches into it (continue-as-new followed back); heartbeats, requests and store writes from the Temporal dev server’s own /metrics, in the run’s own namespace; Kafka figures from the workers’ /metrics; CPU from /proc/<pid>/stat',
      load_avg_1m: { at_start: round(loadAtStart), at_end_of_window: round(os.loadavg()[0] ?? 0) },
    };
    // Written now and again after the rebalance: a rebalance that does not settle keeps the window's figures.
    const save = () =>
      writeResults('scale', figures, { productCommit: measured, versions: { kafka: '4.3.1', temporal: 'temporal CLI dev server 1.9.1 (SQLite, 1 history shard)' }, notes });
    save();

    // ---- two rebalances: a fifth worker joins, then leaves again -----------------------------------
    // Each on the workers' rebalance protocol (cooperative by default: only the partitions that move
    // are revoked; KFT_REBALANCE=eager revokes every partition of every worker). Both stay within 50
    // partitions a worker (192 over 5, then over 4): a partition holds two long-running activities
    // (fold loop, persist report), and on the SDK's default 100 activity slots a worker given more
    // partitions than half its slots left the rest recovering (ScheduleToStart timeouts) — a full
    // run's leave, 192 over 3, did; workers have had 4,096 slots since 167e9bd.
    const rebalances: Record<string, unknown> = {};
    notes.rebalances = rebalances;
    const timeRebalance = async (kind: 'join' | 'leave', change: () => Promise<unknown>, owners: number, watch: FlowWorker[]) => {
      const before = await watcher.visiblePartitions(id);
      const generationBefore = Math.max(-1, ...before.map((p) => p.generation ?? -1));
      const from = await read(temporalPid, brokerPid, serverUrl, [], []);
      process.stdout.write(`rebalance: ${kind} (${owners} workers after)\n`);
      const changed = change();
      const settled = await eventually(`all partitions running on ${owners} workers`, () => watcher.settledSince(id, before, PARTITIONS, owners), REBALANCE_DEADLINE_MS, watch).then(
        () => true,
        (err: Error) => {
          process.stderr.write(`rebalance: ${err.message}\n`);
          return false;
        },
      );
      const to = await read(temporalPid, brokerPid, serverUrl, [], []);
      const ms = to.perf - from.perf;
      await changed;
      const events = await partitionEvents(watcher, id, from.at, to.at);
      const byType = eventsByType(events);
      rebalances[kind] = {
        workers_after: owners,
        settled,
        ms: Math.round(ms),
        ...(settled ? {} : { at_deadline: summarize(await watcher.visiblePartitions(id).catch(() => []), generationBefore) }),
        history_events_by_type: byType,
        temporal_frontend_requests: serverOperations(from, to, 'service_requests', { namespace: nsLabel, service_name: 'frontend' }),
      };
      if (settled) figures[`rebalance_${kind}_ms`] = Math.round(ms);
      figures[`rebalance_${kind}_history_events_per_partition`] = round(events.reduce((n, e) => n + e.events, 0) / PARTITIONS);
      figures[`rebalance_${kind}_activities_per_partition`] = round((byType.ACTIVITY_TASK_SCHEDULED ?? 0) / PARTITIONS);
      figures[`rebalance_${kind}_signals_per_partition`] = round((byType.WORKFLOW_EXECUTION_SIGNALED ?? 0) / PARTITIONS);
      return settled;
    };
    let joined: FlowWorker | undefined;
    const joinSettled = await timeRebalance('join', async () => (joined = await spawn()), WORKERS + 1, run.workers);
    // The workers hold PARTITIONS / (WORKERS + 1) partitions each now: their RSS a little later.
    await sleep(SAMPLE_EVERY_MS);
    notes.worker_rss_mb_after_join = {
      partitions_per_worker: round(PARTITIONS / (WORKERS + 1), 1),
      rss: run.workers.map((w) => processMemoryMb(w.process.pid)?.rss ?? Number.NaN),
    };
    const leaving = joined!;
    const leaveSettled = await timeRebalance('leave', () => leaving.stop(), WORKERS, run.workers.filter((w) => w !== leaving));
    rebalances.how =
      'a fifth worker started, then stopped with SIGTERM (flush, commit, leave the group); each timed until every partition workflow shows running on the workers there are, with the member it had (in its generation) or with another in a newer generation (the visibility store, polled every 250 ms; its list calls are among the frontend requests)';
    notes.load_avg_1m = { ...(notes.load_avg_1m as object), at_end: round(os.loadavg()[0] ?? 0) };
    if (!joinSettled || !leaveSettled) process.exitCode = 1;

    const rows: Row[] = Object.entries(figures).map(([figure, value]) => ({ figure, value }));
    printTable(`scale: ${PARTITIONS} partitions over ${WORKERS} workers, ${Math.round(windowMs / 1000)} s window, persistEvery ${PERSIST_EVERY}`, rows);
    process.stdout.write(`results: ${save()}\n`);
  } finally {
    // Gracefully first (flush, commit, leave): an empty group can be deleted at once, while a killed
    // member holds it for the example's 30 s session timeout.
    await Promise.all(run.workers.map((w) => w.stop(60_000).catch(() => null)));
    await endFlowRun(run);
    await deleteNamespace(namespace);
  }
}

runMain(main);
