// Rebalances as they are today (issue 33): the classic consumer group protocol with eager
// rebalancing, where every rebalance revokes every partition of every member. The baseline for
// incremental assignment.
//
// Scenario, under a steady input (RATE records/s, KEYS keys) of the offset-hash flow
// (bench/flows/offset-hash-probe.ts: test/fixtures/offset-hash-flow.ts with a fold probe),
// transactional Kafka persistence every second, session timeout 6 s (the broker's minimum):
//   start      3 workers (a, b, c) own PARTITIONS partitions (48; quick 12)
//   join       a 4th (d) starts
//   leave      a is stopped gracefully (SIGTERM)
//   kill       b is killed -9
//   rolling-*  each remaining worker in turn: SIGTERM it and start its replacement at once, wait
//              until every partition runs again (the rolling deploy)
// After each step the driver waits until every partition is `running` (status query) on a live
// worker, every live worker owns one, and every partition has folded since; then STEADY_MS of
// plain load before the next step. A step's window runs from its start (the signal or spawn)
// to the next step's start.
//
// What is measured, and how (no product change: a bench flow module and the workers' logs):
//   fold probe   the fold appends `<epoch ms> <partition> <offset>` to a file per worker process
//                for the first record of a partition after 10 ms without a line (synchronously,
//                so a kill -9 loses nothing). A partition's "time without folding" is the gap
//                between two consecutive lines of that partition, whichever worker wrote them.
//                Resolution: a gap is over-stated by at most 10 ms (the throttle) and includes
//                the input's own spacing (the load sends every 50 ms): baseline_gap_* is that
//                floor, measured over the steady window before the first step.
//   owner        a partition's owner before a step is the worker of its last probe line before
//                the step starts; after it, the worker of its last line in the step's window.
//                Same worker: the partition *kept* its owner; otherwise it *moved*.
//   rebalance_pause_kept_p99_ms   for partitions that kept their owner across a step: the longest
//                gap in the step's window (from the last line before the step); p99 over
//                (partition, step) pairs of the graceful steps (join, leave, rolling-*)
//   rebalance_pause_moved_p99_ms  for partitions that moved: the same gap, which for a moved
//                partition is its last fold on the old owner (folding stops at the revoke) to its
//                first fold on the new one; p99 over (partition, step) of the graceful steps
//   kill_pause_*  the same for the kill step, kept and moved apart: a moved partition's gap holds
//                the session timeout (the coordinator notices the dead member only then)
//   rolling_restart_max_stall_s   the longest gap of any partition from the first rolling step's
//                start to the last one's end (load stop)
//   rolling_restart_spurious_fences   fence or stale-generation lines (level warn or above,
//                `fenc`, `stale` or `illegal generation` in the line, naming a partition: a
//                `partition` field, or the partition workflow's id as the Temporal SDK's
//                "Activity failed … StaleGeneration" lines do) logged by a worker during a rolling
//                step for a partition that worker owned both before and after the step;
//                spurious_fences_all the same over every step, fence_lines_all every such line.
//                workflow_fences_on_kept: the partition workflows' own fence counters (status
//                counters.fences, read when a step has settled) that grew across a step on a
//                partition that kept its owner. workflow_task_failures: "Failing workflow task"
//                lines of the Temporal SDK in the workers (each stalls its partition until retried).
//   settle_ms    per step (notes): the step's start to every partition running on a live worker
//                (status queries every 250 ms: resolution about 250 ms plus a query round)
//   records_lost / records_duplicated / keys_mismatched   compareOffsetHash after the load stops,
//                the workers catch up and stop: must all be 0
// Kafka Streams side by side (issue 33) is not part of this run yet (see docs/benchmarks.md).
//
// `npm run bench:rebalance [-- --quick]`; BENCH_WORKER_LOG=<file> keeps the workers' logs there.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Partitioners } from 'kafkajs';
import { sized } from './lib/args';
import {
  caughtUp,
  compareOffsetHash,
  endFlowRun,
  eventually,
  type FlowWorker,
  offsetHashEnv,
  runMain,
  SteadyLoad,
  sleep,
  spawnWorker,
  StatusWatcher,
} from './lib/flow-workers';
import { startProgress } from './lib/progress';
import { benchKafka, uniqueName } from './lib/records';
import { PACKAGE_ROOT, productCommit, writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { brokersFromEnv } from '../config/env';

const FLOW_MODULE = path.join(PACKAGE_ROOT, 'bench', 'flows', 'offset-hash-probe.ts');
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? sized(48, 12));
const KEYS = 1_000;
const RATE = Number(process.env.BENCH_RATE ?? sized(2_000, 600));
const SESSION_TIMEOUT_MS = 6_000;
const PERSIST_EVERY_MS = 1_000;
/** Plain load after a step has settled, before the next (and before the first: the baseline). */
const STEADY_MS = sized(10_000, 5_000);
const SETTLE_DEADLINE_MS = 180_000;

type Kind = 'join' | 'leave' | 'kill' | 'rolling';

interface Step {
  name: string;
  kind: Kind;
  /** Epoch ms. */
  start: number;
  end?: number;
  settledRunning?: number;
  settledFolding?: number;
  workersBefore: number;
  workersAfter: number;
  /** Each partition's workflow fence counter when the step settled. */
  fences?: number[];
}

interface Probe {
  t: number;
  worker: string;
}

/** Reads the workers' fold-probe files as they grow: per partition, its probe lines. */
class Probes {
  readonly byPartition: Probe[][] = Array.from({ length: PARTITIONS }, () => []);
  private readonly files = new Map<string, { file: string; offset: number; rest: string }>();

  add(worker: string, file: string): void {
    this.files.set(worker, { file, offset: 0, rest: '' });
  }

  read(): void {
    for (const [worker, f] of this.files) {
      let size: number;
      try {
        size = fs.statSync(f.file).size;
      } catch {
        continue; // nothing folded yet
      }
      if (size <= f.offset) continue;
      const fd = fs.openSync(f.file, 'r');
      const buf = Buffer.alloc(size - f.offset);
      try {
        fs.readSync(fd, buf, 0, buf.length, f.offset);
      } finally {
        fs.closeSync(fd);
      }
      f.offset = size;
      const lines = (f.rest + buf.toString('utf8')).split('\n');
      f.rest = lines.pop() ?? '';
      for (const line of lines) {
        const [t, p] = line.split(' ').map(Number);
        if (t !== undefined && p !== undefined && p >= 0 && p < PARTITIONS) this.byPartition[p]!.push({ t, worker });
      }
    }
  }

  sorted(): Probe[][] {
    return this.byPartition.map((ps) => [...ps].sort((x, y) => x.t - y.t));
  }

  /** Every partition has a probe at or after `t`. */
  allSince(t: number): boolean {
    return this.byPartition.every((ps) => ps.some((pr) => pr.t >= t));
  }
}

interface PartitionInStep {
  partition: number;
  before?: string;
  after?: string;
  kept: boolean;
  gapMs: number;
}

/** A partition's longest time without folding in [start, end], counted from its last probe before start. */
function longestGap(probes: Probe[], start: number, end: number): number {
  let last: number | undefined;
  let gap = 0;
  for (const pr of probes) {
    if (pr.t < start) {
      last = pr.t;
      continue;
    }
    if (pr.t > end) break;
    if (last !== undefined) gap = Math.max(gap, pr.t - last);
    last = pr.t;
  }
  return Math.max(gap, end - (last ?? start));
}

function analyseStep(probes: Probe[][], start: number, end: number): PartitionInStep[] {
  return probes.map((ps, partition) => {
    const before = ps.filter((pr) => pr.t < start).at(-1)?.worker;
    const after = ps.filter((pr) => pr.t >= start && pr.t <= end).at(-1)?.worker;
    return { partition, before, after, kept: before !== undefined && before === after, gapMs: longestGap(ps, start, end) };
  });
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

interface FenceLine {
  t: number;
  worker: string;
  partition: number;
  msg: string;
}

/** Fence / stale-generation lines the workers logged (warn or above, with a partition field). */
function fenceLines(workers: FlowWorker[], flow: string): FenceLine[] {
  const out: FenceLine[] = [];
  for (const w of workers) {
    for (const l of w.lines) {
      const j = l.json;
      if (!j || (j.level ?? 0) < 40) continue;
      if (!/fenc|stale|illegal.?generation/i.test(l.line)) continue;
      // The worker's own lines name the partition; the Temporal SDK's (an activity failed with
      // StaleGeneration) name the partition workflow, whose id ends in the partition.
      const fromWorkflow = typeof j.workflowId === 'string' && j.workflowId.startsWith(`kafka-flow/${flow}/`) ? Number(j.workflowId.split('/').at(-1)) : undefined;
      const partition = typeof j.partition === 'number' ? j.partition : fromWorkflow;
      if (partition === undefined || !Number.isInteger(partition)) continue;
      const error = j.error as { type?: string } | undefined;
      const what = [j.msg, j.activityType, error?.type].filter((x) => typeof x === 'string').join(' / ');
      out.push({ t: performance.timeOrigin + l.at, worker: w.name, partition, msg: what });
    }
  }
  return out;
}

/** Workflow tasks the Temporal SDK failed in the workers (retried by the server; each a stall of its partition). */
function workflowTaskFailures(workers: FlowWorker[]): Array<{ t: number; worker: string; error: string }> {
  const out: Array<{ t: number; worker: string; error: string }> = [];
  for (const w of workers) {
    for (const l of w.lines) {
      if (l.json?.msg !== 'Failing workflow task') continue;
      out.push({ t: performance.timeOrigin + l.at, worker: w.name, error: String(l.json.failure ?? '').slice(0, 300) });
    }
  }
  return out;
}

async function main(): Promise<void> {
  const commit = productCommit();
  const brokers = brokersFromEnv();
  const id = uniqueName('bench-rebalance');
  const names = { name: id, group: id, topic: id, backend: 'kafka' as const, persistEveryMs: PERSIST_EVERY_MS, sessionTimeoutMs: SESSION_TIMEOUT_MS };
  const kafka = benchKafka('bench-rebalance', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const all: FlowWorker[] = [];
  const live: FlowWorker[] = [];
  const exits: Record<string, number | null> = {};
  const probes = new Probes();
  const probeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-rebalance-'));
  const env = offsetHashEnv(id, PERSIST_EVERY_MS, SESSION_TIMEOUT_MS);
  const logFile = process.env.BENCH_WORKER_LOG;
  const loads: number[] = [os.loadavg()[0] ?? 0];
  let watcher: StatusWatcher | undefined;
  let input: SteadyLoad | undefined;
  const steps: Step[] = [];
  const started = Date.now();
  const say = (s: string) => process.stdout.write(`${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s  ${s}\n`);

  const spawn = (name: string) => {
    const foldLog = path.join(probeDir, `${name}.folds`);
    const w = spawnWorker(name, FLOW_MODULE, { ...env, BENCH_FOLD_LOG: foldLog }, logFile);
    probes.add(name, foldLog);
    all.push(w);
    live.push(w);
    return w;
  };
  const retire = (w: FlowWorker) => live.splice(live.indexOf(w), 1);

  /** Every partition running on a live worker, each live worker owning one; then folding since. */
  const settle = async (step: Step): Promise<void> => {
    const w = watcher!;
    const progress = startProgress(`${step.name}: partitions running`, PARTITIONS, { plainEveryMs: 5_000 });
    try {
      const rows = await eventually(
        `${step.name}: every partition running on the ${live.length} live workers`,
        async () => {
          const rs = await w.statuses(id, id, PARTITIONS);
          const pids = live.map((l) => `/${l.process.pid}-`);
          const onLive = rs.filter((r) => r?.phase === 'running' && pids.some((p) => r.owner?.taskQueue.includes(p)));
          progress.update(onLive.length);
          if (onLive.length !== PARTITIONS) return undefined;
          if (!pids.every((p) => onLive.some((r) => r!.owner!.taskQueue.includes(p)))) return undefined;
          return onLive;
        },
        SETTLE_DEADLINE_MS,
        live,
      );
      step.settledRunning = Date.now();
      step.fences = rows.map((r) => r!.counters.fences);
    } finally {
      progress.stop();
    }
    await eventually(
      `${step.name}: every partition folding`,
      async () => {
        probes.read();
        return probes.allSince(step.settledRunning!);
      },
      60_000,
      live,
    );
    step.settledFolding = Date.now();
    loads.push(os.loadavg()[0] ?? 0);
    say(`${step.name}: running after ${step.settledRunning - step.start} ms, all folding after ${step.settledFolding - step.start} ms (${live.map((l) => l.name).join(', ')})`);
  };
  const begin = (name: string, kind: Kind): Step => {
    const prev = steps.at(-1);
    const step: Step = { name, kind, start: Date.now(), workersBefore: live.length, workersAfter: live.length };
    if (prev) prev.end = step.start;
    steps.push(step);
    return step;
  };

  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();
    input = new SteadyLoad(producer, id, RATE, KEYS);
    watcher = await StatusWatcher.connect();
    say(`${PARTITIONS} partitions, ${RATE} records/s over ${KEYS} keys, session timeout ${SESSION_TIMEOUT_MS} ms, persist every ${PERSIST_EVERY_MS} ms; probes in ${probeDir}`);

    for (const n of ['a', 'b', 'c']) spawn(n);
    const first = begin('start', 'join');
    first.workersBefore = 0;
    first.workersAfter = 3;
    await settle(first);
    await sleep(STEADY_MS);
    const baselineStart = first.settledFolding!;

    const join = begin('join', 'join');
    const baselineEnd = join.start;
    spawn('d');
    join.workersAfter = live.length;
    await settle(join);
    await sleep(STEADY_MS);

    const leave = begin('leave', 'leave');
    const a = live.find((w) => w.name === 'a')!;
    retire(a);
    leave.workersAfter = live.length;
    const aExit = a.stop().then((code) => {
      exits.a = code;
    });
    await settle(leave);
    await aExit;
    await sleep(STEADY_MS);

    const kill = begin('kill', 'kill');
    const b = live.find((w) => w.name === 'b')!;
    retire(b);
    kill.workersAfter = live.length;
    b.kill();
    exits.b = null;
    await settle(kill);
    await sleep(STEADY_MS);

    const rolling = [...live];
    for (const [i, old] of rolling.entries()) {
      const step = begin(`rolling-${old.name}`, 'rolling');
      retire(old);
      const exit = old.stop().then((code) => {
        exits[old.name] = code;
      });
      spawn(`${old.name}${i + 2}`);
      step.workersAfter = live.length;
      await settle(step);
      await exit;
      await sleep(STEADY_MS);
    }
    const loadEnd = Date.now();
    steps.at(-1)!.end = loadEnd;

    await input.stop();
    say(`load stopped (${input.produced} records); waiting for the workers to catch up`);
    await eventually('the workers caught up', async () => caughtUp(admin, id), 120_000, live);
    for (const w of [...live]) {
      exits[w.name] = await w.stop();
      retire(w);
    }
    const exact = await compareOffsetHash(names, PARTITIONS, brokers);

    // ---- analysis ----
    probes.read();
    const sorted = probes.sorted();
    const baselineGaps = sorted.map((ps) => longestGap(ps, baselineStart, baselineEnd));
    const fences = fenceLines(all, id);
    const taskFailures = workflowTaskFailures(all);
    const perStep = steps.slice(1).map((s, i) => {
      const parts = analyseStep(sorted, s.start, s.end!);
      const prevFences = steps[i]!.fences;
      const inStep = fences.filter((f) => f.t >= s.start && f.t < s.end!);
      const spurious = inStep.filter((f) => parts[f.partition]?.kept && parts[f.partition]?.before === f.worker);
      const workflowFencesOnKept = parts.reduce(
        (n, p) => n + (p.kept && s.fences && prevFences ? Math.max(0, (s.fences[p.partition] ?? 0) - (prevFences[p.partition] ?? 0)) : 0),
        0,
      );
      return { step: s, parts, fenceLines: inStep, spurious, workflowFencesOnKept };
    });
    const graceful = perStep.filter((x) => x.step.kind !== 'kill');
    const killStep = perStep.find((x) => x.step.kind === 'kill')!;
    const rollingSteps = perStep.filter((x) => x.step.kind === 'rolling');
    const gaps = (xs: typeof perStep, kept: boolean) => xs.flatMap((x) => x.parts.filter((p) => p.kept === kept).map((p) => p.gapMs));
    const rollingStart = rollingSteps[0]!.step.start;
    const rollingStall = Math.max(...sorted.map((ps) => longestGap(ps, rollingStart, loadEnd)));

    const figures: Record<string, number> = {
      rebalance_pause_kept_p99_ms: quantile(gaps(graceful, true), 0.99),
      rebalance_pause_moved_p99_ms: quantile(gaps(graceful, false), 0.99),
      rebalance_pause_kept_p50_ms: quantile(gaps(graceful, true), 0.5),
      rebalance_pause_moved_p50_ms: quantile(gaps(graceful, false), 0.5),
      rebalance_pause_kept_max_ms: Math.max(0, ...gaps(graceful, true)),
      rebalance_pause_moved_max_ms: Math.max(0, ...gaps(graceful, false)),
      rebalance_partitions_kept: gaps(graceful, true).length,
      rebalance_partitions_moved: gaps(graceful, false).length,
      kill_pause_kept_p99_ms: quantile(gaps([killStep], true), 0.99),
      kill_pause_moved_max_ms: Math.max(0, ...gaps([killStep], false)),
      rolling_restart_max_stall_s: Number((rollingStall / 1000).toFixed(2)),
      rolling_restart_total_s: Number(((loadEnd - rollingStart) / 1000).toFixed(1)),
      rolling_restart_spurious_fences: rollingSteps.reduce((n, x) => n + x.spurious.length, 0),
      spurious_fences_all: perStep.reduce((n, x) => n + x.spurious.length, 0),
      fence_lines_all: fences.length,
      workflow_fences_on_kept: perStep.reduce((n, x) => n + x.workflowFencesOnKept, 0),
      workflow_task_failures: taskFailures.length,
      baseline_gap_p99_ms: quantile(baselineGaps, 0.99),
      baseline_gap_p50_ms: quantile(baselineGaps, 0.5),
      partitions: PARTITIONS,
      rate_records_per_s: RATE,
      session_timeout_ms: SESSION_TIMEOUT_MS,
      records: input.produced,
      ...exact,
      load_avg_1m_max: Number(Math.max(...loads).toFixed(2)),
      run_s: Math.round((Date.now() - started) / 1000),
    };

    const rows: Row[] = perStep.map((x) => {
      const kept = x.parts.filter((p) => p.kept).map((p) => p.gapMs);
      const moved = x.parts.filter((p) => !p.kept).map((p) => p.gapMs);
      return {
        step: x.step.name,
        workers: `${x.step.workersBefore}->${x.step.workersAfter}`,
        running_ms: x.step.settledRunning! - x.step.start,
        kept: kept.length,
        kept_p50_ms: quantile(kept, 0.5),
        kept_max_ms: Math.max(0, ...kept),
        moved: moved.length,
        moved_p50_ms: quantile(moved, 0.5),
        moved_max_ms: Math.max(0, ...moved),
        fence_lines: x.fenceLines.length,
        spurious: x.spurious.length,
        wf_fences_kept: x.workflowFencesOnKept,
      };
    });
    printTable(`rebalance: eager (classic protocol), ${PARTITIONS} partitions, ${RATE} records/s; gaps in folding per partition (baseline p99 ${figures.baseline_gap_p99_ms} ms)`, rows);
    printTable(
      'rebalance figures',
      Object.entries(figures).map(([figure, value]) => ({ figure, value })),
    );
    const file = writeResults('rebalance', figures, {
      versions: { kafka: '4.3.1' },
      productCommit: commit,
      notes: {
        protocol: 'classic consumer group protocol, eager rebalancing (kafkajs port), as of the product commit',
        flow: 'bench/flows/offset-hash-probe.ts (test/fixtures/offset-hash-flow.ts with a fold probe), transactional Kafka persistence',
        scenario: '3 workers; a 4th joins; one leaves (SIGTERM); one killed -9; each remaining one restarted in turn (SIGTERM + replacement started at once)',
        keys: KEYS,
        persist_every_ms: PERSIST_EVERY_MS,
        steady_ms_between_steps: STEADY_MS,
        measured:
          'fold probe: per worker a file of `<epoch ms> <partition> <offset>`, the first record of a partition after 10 ms without a line; a gap between two lines of a partition is time without folding (over-stated by <= 10 ms; the load sends every 50 ms). kept/moved: the worker of the last line before the step vs the last line in the step window. p99 over (partition, step) of join, leave and the rolling steps; kill apart',
        fences:
          'worker lines at warn+ matching fenc|stale|illegal generation with a partition field; spurious when the logging worker owned the partition before and after the step',
        steps: rows,
        fence_lines: fences.map((f) => ({ ...f, t: Math.round(f.t - started) })),
        workflow_task_failures: taskFailures.map((f) => ({ ...f, t: Math.round(f.t - started) })),
        exits,
        load_avg_1m: loads.map((l) => Number(l.toFixed(2))),
      },
    });
    say(`results: ${file}`);
    if (exact.records_lost + exact.records_duplicated + exact.keys_mismatched > 0) process.exitCode = 1;
  } finally {
    await endFlowRun({ id, partitions: PARTITIONS, brokers, input, workers: all, watcher, producer, admin });
    if (!process.env.BENCH_KEEP_PROBES) fs.rmSync(probeDir, { recursive: true, force: true });
  }
}

runMain(main);
