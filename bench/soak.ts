// Soak (issue 28): the offset-hash flow (test/fixtures/offset-hash-flow.ts, transactional Kafka
// persistence) at a steady load for a long time, with a rebalance every REBALANCE_EVERY_MS: a
// second worker joins, then leaves gracefully, then joins again… while worker `a` runs throughout.
// Sampled every SAMPLE_EVERY_MS from /proc and Temporal:
//   soak_rss_slope_mb_per_min   a's resident memory, least-squares slope after the warm-up
//   soak_fds_slope_per_min      a's open file descriptors (sockets, files: its handles), the same
//   soak_max_history_events     the longest partition workflow history seen (continue-as-new bounds it)
// and at the end, with the load stopped and the workers caught up and stopped, the persisted state
// against a plain fold of the input (records lost / duplicated, keys mismatched: all must be 0).
// `npm run bench:soak [-- --quick]`: full 30 min at 1,000 records/s, a rebalance every 2 min;
// quick 3 min at 300 records/s, one every 40 s.
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Partitioners } from 'kafkajs';
import { brokersFromEnv } from '../config/env';
import { partitionWorkflowId } from '../workflows/partition-workflow';
import { sized } from './lib/args';
import {
  caughtUp,
  compareOffsetHash,
  endFlowRun,
  eventually,
  type FlowWorker,
  offsetHashEnv,
  SteadyLoad,
  sleep,
  spawnWorker,
  StatusWatcher,
  runMain,
} from './lib/flow-workers';
import { benchKafka, uniqueName } from './lib/records';
import { PACKAGE_ROOT, productCommit, writeResults } from './lib/results';
import { printTable } from './lib/table';

const FLOW_MODULE = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'offset-hash-flow.ts');
const PARTITIONS = 6;
const KEYS = 10_000;
const RATE = sized(1_000, 300);
const DURATION_MS = Number(process.env.BENCH_SOAK_MINUTES ?? sized(30, 3)) * 60_000;
const REBALANCE_EVERY_MS = sized(120_000, 40_000);
const WARM_UP_MS = sized(300_000, 60_000);
const SAMPLE_EVERY_MS = 5_000;
const SESSION_TIMEOUT_MS = 6_000;
const PERSIST_EVERY_MS = 1_000;

interface Sample {
  /** Minutes since the load started. */
  min: number;
  rssMb: number;
  rssAnonMb: number;
  fds: number;
  maxHistory: number;
  workers: number;
}

/** VmRSS and RssAnon of a process, in MB. */
function memoryOf(pid: number): { rss: number; anon: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS') / 1024, anon: kb('RssAnon') / 1024 };
}

const fdsOf = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

/** Least-squares slope of y over x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

async function main(): Promise<void> {
  const brokers = brokersFromEnv();
  const id = uniqueName('bench-soak');
  const names = { name: id, group: id, topic: id, backend: 'kafka' as const, persistEveryMs: PERSIST_EVERY_MS, sessionTimeoutMs: SESSION_TIMEOUT_MS };
  const kafka = benchKafka('bench-soak', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const workers: FlowWorker[] = [];
  let watcher: StatusWatcher | undefined;
  let input: SteadyLoad | undefined;
  const samples: Sample[] = [];
  const rebalances: Array<{ min: number; event: string; exit?: number | null }> = [];
  const load = os.loadavg()[0] ?? 0;
  const measured = productCommit();
  process.stdout.write(`soak: ${DURATION_MS / 60_000} min at ${RATE} records/s over ${PARTITIONS} partitions, a rebalance every ${REBALANCE_EVERY_MS / 1000} s\n`);
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();
    const env = offsetHashEnv(id, PERSIST_EVERY_MS, SESSION_TIMEOUT_MS);
    const logFile = process.env.BENCH_WORKER_LOG;
    const a = spawnWorker('a', FLOW_MODULE, env, logFile);
    workers.push(a);
    watcher = await StatusWatcher.connect();
    const w = watcher;
    await eventually('worker a runs every partition', () => w.runningOn(id, id, PARTITIONS, 1), 180_000, [a]);

    const started = performance.now();
    const minutes = () => (performance.now() - started) / 60_000;
    input = new SteadyLoad(producer, id, RATE, KEYS);

    let b: FlowWorker | undefined;
    let generation = 0;
    let nextRebalance = REBALANCE_EVERY_MS;
    let nextSample = 0;
    const ids = Array.from({ length: PARTITIONS }, (_, partition) => partitionWorkflowId({ flow: id, topic: id, partition }));
    while (performance.now() - started < DURATION_MS) {
      const elapsed = performance.now() - started;
      if (a.process.exitCode !== null) throw new Error(`worker a exited (${a.process.exitCode})`);
      if (elapsed >= nextRebalance) {
        nextRebalance += REBALANCE_EVERY_MS;
        if (b === undefined) {
          b = spawnWorker(`b${++generation}`, FLOW_MODULE, env, logFile);
          workers.push(b);
          rebalances.push({ min: minutes(), event: `${b.name} joins` });
        } else {
          const leaving = b;
          b = undefined;
          rebalances.push({ min: minutes(), event: `${leaving.name} leaves`, exit: await leaving.stop() });
        }
      }
      if (elapsed >= nextSample) {
        nextSample += SAMPLE_EVERY_MS;
        const mem = memoryOf(a.process.pid!);
        const histories = await Promise.all(
          ids.map((wid) =>
            w.client.workflow
              .getHandle(wid)
              .describe()
              .then((d) => d.historyLength)
              .catch(() => 0),
          ),
        );
        samples.push({ min: minutes(), rssMb: mem.rss, rssAnonMb: mem.anon, fds: fdsOf(a.process.pid!), maxHistory: Math.max(...histories), workers: b ? 2 : 1 });
        const last = samples[samples.length - 1]!;
        process.stdout.write(
          `  ${last.min.toFixed(1)} min: rss ${last.rssMb.toFixed(0)} MB (anon ${last.rssAnonMb.toFixed(0)}), fds ${last.fds}, longest history ${last.maxHistory} events, ${last.workers} worker(s), produced ${input.produced}\n`,
        );
      }
      await sleep(250);
    }
    await input.stop();
    const live = workers.filter((x) => x.process.exitCode === null);
    await eventually('the workers caught up', async () => caughtUp(admin, id), 180_000, live);
    const exits = await Promise.all(live.map((x) => x.stop()));
    const exact = await compareOffsetHash(names, PARTITIONS, brokers);

    const warm = samples.filter((s) => s.min * 60_000 >= WARM_UP_MS);
    const figures: Record<string, number> = {
      soak_rss_slope_mb_per_min: Number(slope(warm.map((s) => [s.min, s.rssMb])).toFixed(3)),
      soak_rss_anon_slope_mb_per_min: Number(slope(warm.map((s) => [s.min, s.rssAnonMb])).toFixed(3)),
      soak_fds_slope_per_min: Number(slope(warm.map((s) => [s.min, s.fds])).toFixed(3)),
      soak_max_history_events: Math.max(...samples.map((s) => s.maxHistory)),
      soak_rss_mb_end: Math.round(samples[samples.length - 1]?.rssMb ?? Number.NaN),
      soak_fds_end: samples[samples.length - 1]?.fds ?? Number.NaN,
      soak_minutes: Number((DURATION_MS / 60_000).toFixed(1)),
      soak_rebalances: rebalances.length,
      soak_records: input.produced,
      records_lost: exact.records_lost,
      records_duplicated: exact.records_duplicated,
      keys_mismatched: exact.keys_mismatched,
    };
    printTable(`soak: ${figures.soak_minutes} min, ${rebalances.length} rebalances, worker a throughout`, [figures]);
    const file = writeResults('soak', figures, {
      productCommit: measured,
      versions: { kafka: '4.3.1' },
      notes: {
        flow: 'test/fixtures/offset-hash-flow.ts, transactional Kafka persistence',
        partitions: PARTITIONS,
        keys: KEYS,
        rate_records_per_s: RATE,
        rebalance_every_ms: REBALANCE_EVERY_MS,
        warm_up_ms: WARM_UP_MS,
        sample_every_ms: SAMPLE_EVERY_MS,
        statistic: "slopes: least squares over worker a's samples after the warm-up; history: the longest partition workflow history (describe().historyLength) over all samples",
        load_avg_1m_at_start: Number(load.toFixed(2)),
        rebalances,
        worker_exits: exits,
        samples,
      },
    });
    process.stdout.write(`results: ${file}\n`);
    if (exact.records_lost + exact.records_duplicated + exact.keys_mismatched > 0 || exits.some((e) => e !== 0) || rebalances.some((r) => r.exit !== undefined && r.exit !== 0)) {
      process.exitCode = 1;
    }
  } finally {
    await endFlowRun({ id, partitions: PARTITIONS, brokers, input, workers, watcher, producer, admin });
  }
}

runMain(main);
