// Rebalances (issue 33): ours on the classic consumer group protocol with cooperative rebalancing
// (the default; KFT_REBALANCE=eager measures the eager protocol, where every rebalance revokes every
// partition of every member) side by side with Kafka Streams (same topology, its cooperative
// rebalancing) in the same run, each on its own topic, ours first.
//
// Scenario, under a steady input (RATE records/s, KEYS keys), session timeout 6 s (the broker's
// minimum), persist / commit every second:
//   ours       the offset-hash flow (bench/flows/offset-hash-probe.ts: test/fixtures/offset-hash-flow.ts
//              with a fold probe), transactional Kafka persistence, one worker process per member
//   streams    bench/anchors/kafka-streams RebalanceApp: the same count + offset hash per key in a
//              changelogged store, exactly-once v2, one JVM (one stream thread) per member
//   start      3 members (a, b, c) own PARTITIONS partitions (48; quick 12)
//   join       a 4th (d) starts
//   leave      a is stopped gracefully (SIGTERM)
//   kill       b is killed -9
//   rolling-*  each remaining member in turn: SIGTERM it and start its replacement at once, wait
//              until every partition folds again (the rolling deploy)
// After each step the driver waits until the step has settled, then STEADY_MS of plain load
// before the next step. Settled: every live member folding in the last 2 s and every partition's
// latest fold on a live member, in the last 2 s and since the step's start (the fold probe
// below); plus, ours, every partition workflow's phase `running` in the visibility store, and
// Kafka Streams every live instance's last state RUNNING. (No status query per partition while
// waiting: each is a task the measured workers must answer; one round after settling reads the
// workflows' fence counters.) A step's window runs from its start (the signal or the spawn) to
// the next step's start; the last one ends when the load stops.
//
// What is measured, and how (no product change: a bench flow module and the members' logs):
//   fold probe   the fold appends `<epoch ms> <partition> <offset>` to a file per member process
//                for the first record of a partition after 10 ms without a line (synchronously,
//                so a kill -9 loses nothing). A partition's "time without folding" is the gap
//                between two consecutive lines of that partition, whichever member wrote them.
//                Resolution: a gap is over-stated by at most 10 ms (the throttle) and includes
//                the input's own spacing (the load sends every 50 ms): baseline_gap_* is that
//                floor, the longest gap per partition over the steady window before the first
//                step (p50 / p99 over partitions).
//   owner        a partition's owner before a step is the member of its last probe line before
//                the step starts; after it, the member of its last line in the step's window.
//                Same member: the partition *kept* its owner; otherwise it *moved*.
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
//   rolling_restart_spurious_fences   (ours) fence or stale-generation lines (level warn or above,
//                `fenc`, `stale` or `illegal generation` in the line, naming a partition: a
//                `partition` field, or the partition workflow's id as the Temporal SDK's
//                "Activity failed … StaleGeneration" lines do) logged by a worker during a rolling
//                step for a partition that worker owned both before and after the step;
//                spurious_fences_all the same over every step, fence_lines_all every such line.
//                workflow_fences_on_kept: the partition workflows' own fence counters (status
//                counters.fences, read when a step has settled) that grew across a step on a
//                partition that kept its owner. workflow_task_failures: "Failing workflow task"
//                lines of the Temporal SDK in the workers (each stalls its partition until retried).
//                Kafka Streams: streams_fence_lines_all counts its lines matching
//                ProducerFenced|InvalidProducerEpoch|TaskMigrated|fenced (not per partition).
//   settled_ms   per step (table, notes): the step's start to settled as above (polled every 250 ms
//                plus the poll's own time); folding_ms: to the first poll where its fold-probe
//                half held
//   records_lost / records_duplicated / keys_mismatched   after the load stops and every member
//                has caught up (committed offsets at the log end) and stopped, per key against a
//                plain fold of the input: ours the persisted state (compareOffsetHash), Kafka
//                Streams its store's changelog read committed. All must be 0.
// Kafka Streams' figures are recorded with the prefix streams_.
//
// `npm run bench:rebalance [-- --quick]`; BENCH_REBALANCE_ONLY=ours|streams runs one side;
// BENCH_WORKER_LOG=<file> keeps the members' logs there; BENCH_KEEP_PROBES=1 keeps the probe files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Partitioners } from 'kafkajs';
import { sized } from './lib/args';
import { ensureStreamsJar, STREAMS_VERSION } from './lib/anchors';
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
import { compareStreamsOffsetHash, spawnStreamsApp } from './lib/streams-app';
import { brokersFromEnv } from '../config/env';

const FLOW_MODULE = path.join(PACKAGE_ROOT, 'bench', 'flows', 'offset-hash-probe.ts');
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? sized(48, 12));
/** Our rebalance protocol: the flows' default unless the worker's KFT_REBALANCE (passed through to them) says otherwise. */
const OUR_PROTOCOL = process.env.KFT_REBALANCE || 'cooperative';
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
  settledFolding?: number;
  /** When the fold-probe half of settled first held (epoch ms). */
  foldingAt?: number;
  /** What the last poll before settling was still waiting for, once every partition folded. */
  waitingFor?: string;
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

  /** Each partition's latest probe (by time). */
  latest(): Array<Probe | undefined> {
    return this.byPartition.map((ps) => ps.reduce<Probe | undefined>((a, pr) => (a === undefined || pr.t > a.t ? pr : a), undefined));
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

type Side = 'ours' | 'streams';

interface SideRun {
  figures: Record<string, number>;
  rows: Row[];
  notes: Record<string, unknown>;
  lostDuplicatedMismatched: number;
}

/** The scenario on one side (ours: worker processes of the probe flow; streams: RebalanceApp instances), on its own topic. */
async function runSide(side: Side, started: number): Promise<SideRun> {
  const brokers = brokersFromEnv();
  const id = uniqueName(side === 'ours' ? 'bench-rebalance' : 'bench-rebalance-ks');
  const names = { name: id, group: id, topic: id, backend: 'kafka' as const, persistEveryMs: PERSIST_EVERY_MS, sessionTimeoutMs: SESSION_TIMEOUT_MS };
  const kafka = benchKafka('bench-rebalance', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const all: FlowWorker[] = [];
  const live: FlowWorker[] = [];
  const exits: Record<string, number | null> = {};
  const probes = new Probes();
  const probeDir = fs.mkdtempSync(path.join(os.tmpdir(), `bench-rebalance-${side}-`));
  const env = offsetHashEnv(id, PERSIST_EVERY_MS, SESSION_TIMEOUT_MS);
  const logFile = process.env.BENCH_WORKER_LOG;
  const loads: number[] = [os.loadavg()[0] ?? 0];
  let watcher: StatusWatcher | undefined;
  let input: SteadyLoad | undefined;
  const steps: Step[] = [];
  const label = side === 'ours' ? 'ours' : 'kafka-streams';
  const say = (s: string) => process.stdout.write(`${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s  [${label}] ${s}\n`);

  const start = (name: string) => {
    const foldLog = path.join(probeDir, `${name}.folds`);
    const w =
      side === 'ours'
        ? spawnWorker(name, FLOW_MODULE, { ...env, BENCH_FOLD_LOG: foldLog }, logFile)
        : spawnStreamsApp(name, id, brokers, path.join(probeDir, `${name}.state`), foldLog, { logFile });
    probes.add(name, foldLog);
    all.push(w);
    live.push(w);
    return w;
  };
  const retire = (w: FlowWorker) => live.splice(live.indexOf(w), 1);

  /**
   * Settled, from what perturbs no member: every live member folding in the last 2 s, and every
   * partition's latest fold on a live member, in the last 2 s and since the step's start; for
   * Kafka Streams every live instance's last state RUNNING, for ours every partition workflow's
   * phase `running` in the visibility store (one list call to the Temporal server — a status
   * query per partition is a task the workers being measured must answer). Then, ours only, one
   * round of status queries for the workflows' fence counters.
   */
  const settle = async (step: Step): Promise<void> => {
    const liveNames = () => new Set(live.map((w) => w.name));
    const state = (w: FlowWorker) => [...w.lines].reverse().find((l) => l.line.startsWith('STATE '))?.line.split(' ')[1];
    const progress = startProgress(`${step.name}: partitions folding on live members`, PARTITIONS, { plainEveryMs: 5_000 });
    await eventually(
      `${step.name}: every partition folding on the ${live.length} live members`,
      async () => {
        probes.read();
        const now = Date.now();
        const since = Math.max(step.start, now - 2_000);
        const latest = probes.latest();
        const names = liveNames();
        const folding = latest.filter((pr) => pr !== undefined && names.has(pr.worker) && pr.t >= since).length;
        progress.update(folding);
        if (folding < PARTITIONS) return false;
        if (!live.every((w) => latest.some((pr) => pr!.worker === w.name))) return false;
        step.foldingAt ??= now;
        if (side === 'streams') {
          const states = live.map((w) => state(w));
          if (states.every((st) => st === 'RUNNING')) return true;
          step.waitingFor = `states ${states.join(',')}`;
          return false;
        }
        const visible = await watcher!.visiblePartitions(id);
        const phases = new Map<string, number>();
        for (const v of visible) phases.set(String(v.phase), (phases.get(String(v.phase)) ?? 0) + 1);
        if (visible.length === PARTITIONS && visible.every((v) => v.phase === 'running')) return true;
        const notRunning = visible.filter((v) => v.phase !== 'running').map((v) => `${v.partition}:${v.phase}`);
        step.waitingFor = `visible phases ${[...phases].map(([k, n]) => `${k}:${n}`).join(',')} (not running: ${notRunning.join(' ') || '-'}) at +${now - step.start} ms`;
        return false;
      },
      SETTLE_DEADLINE_MS,
      live,
    ).finally(() => progress.stop());
    step.settledFolding = Date.now();
    if (side === 'ours') {
      const rows = await watcher!.statuses(id, id, PARTITIONS, 10_000);
      if (rows.every((r) => r !== undefined)) step.fences = rows.map((r) => r!.counters.fences);
    }
    loads.push(os.loadavg()[0] ?? 0);
    const waited = step.foldingAt !== undefined && step.settledFolding - step.foldingAt > 1_000 ? `; every partition folding after ${step.foldingAt - step.start} ms, then waited for ${step.waitingFor}` : '';
    say(`${step.name}: settled after ${step.settledFolding - step.start} ms (${live.map((l) => l.name).join(', ')})${waited}`);
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
    if (side === 'ours') watcher = await StatusWatcher.connect();
    say(`${PARTITIONS} partitions, ${RATE} records/s over ${KEYS} keys, session timeout ${SESSION_TIMEOUT_MS} ms, commit/persist every ${PERSIST_EVERY_MS} ms; probes in ${probeDir}`);

    for (const n of ['a', 'b', 'c']) start(n);
    const first = begin('start', 'join');
    first.workersBefore = 0;
    first.workersAfter = 3;
    await settle(first);
    await sleep(STEADY_MS);
    const baselineStart = first.settledFolding!;

    const join = begin('join', 'join');
    const baselineEnd = join.start;
    start('d');
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
      start(`${old.name}${i + 2}`);
      step.workersAfter = live.length;
      await settle(step);
      await exit;
      await sleep(STEADY_MS);
    }
    const loadEnd = Date.now();
    steps.at(-1)!.end = loadEnd;

    await input.stop();
    say(`load stopped (${input.produced} records); waiting for the ${side === 'ours' ? 'workers' : 'instances'} to catch up`);
    await eventually('caught up', async () => caughtUp(admin, id), 120_000, live);
    for (const w of [...live]) {
      exits[w.name] = await w.stop();
      retire(w);
    }
    const exact = side === 'ours' ? await compareOffsetHash(names, PARTITIONS, brokers) : await compareStreamsOffsetHash(id, `${id}-offsethash-changelog`, PARTITIONS, brokers);

    // ---- analysis ----
    probes.read();
    const sorted = probes.sorted();
    const baselineGaps = sorted.map((ps) => longestGap(ps, baselineStart, baselineEnd));
    const fences = side === 'ours' ? fenceLines(all, id) : [];
    const taskFailures = side === 'ours' ? workflowTaskFailures(all) : [];
    // Kafka Streams' own fence lines (not attributed to a partition: counted only).
    const streamsFenceLines = side === 'streams' ? all.flatMap((w) => w.lines.filter((l) => /ProducerFenced|InvalidProducerEpoch|TaskMigrated|fenced/i.test(l.line))).length : 0;
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
      ...(side === 'ours'
        ? {
            rolling_restart_spurious_fences: rollingSteps.reduce((n, x) => n + x.spurious.length, 0),
            spurious_fences_all: perStep.reduce((n, x) => n + x.spurious.length, 0),
            fence_lines_all: fences.length,
            workflow_fences_on_kept: perStep.reduce((n, x) => n + x.workflowFencesOnKept, 0),
            workflow_task_failures: taskFailures.length,
          }
        : { fence_lines_all: streamsFenceLines }),
      baseline_gap_p99_ms: quantile(baselineGaps, 0.99),
      baseline_gap_p50_ms: quantile(baselineGaps, 0.5),
      records: input.produced,
      ...exact,
      load_avg_1m_max: Number(Math.max(...loads).toFixed(2)),
    };

    const rows: Row[] = perStep.map((x) => {
      const kept = x.parts.filter((p) => p.kept).map((p) => p.gapMs);
      const moved = x.parts.filter((p) => !p.kept).map((p) => p.gapMs);
      return {
        side: label,
        step: x.step.name,
        workers: `${x.step.workersBefore}->${x.step.workersAfter}`,
        folding_ms: (x.step.foldingAt ?? x.step.settledFolding!) - x.step.start,
        settled_ms: x.step.settledFolding! - x.step.start,
        kept: kept.length,
        kept_p50_ms: quantile(kept, 0.5),
        kept_max_ms: Math.max(0, ...kept),
        moved: moved.length,
        moved_p50_ms: quantile(moved, 0.5),
        moved_max_ms: Math.max(0, ...moved),
        ...(side === 'ours' ? { fence_lines: x.fenceLines.length, spurious: x.spurious.length, wf_fences_kept: x.workflowFencesOnKept } : {}),
      };
    });
    return {
      figures,
      rows,
      lostDuplicatedMismatched: exact.records_lost + exact.records_duplicated + exact.keys_mismatched,
      notes: {
        topic: id,
        steps: rows,
        settle_last_waited_for: Object.fromEntries(steps.filter((x) => x.waitingFor).map((x) => [x.name, x.waitingFor])),
        ...(side === 'ours'
          ? {
              fence_lines: fences.map((f) => ({ ...f, t: Math.round(f.t - started) })),
              workflow_task_failures: taskFailures.map((f) => ({ ...f, t: Math.round(f.t - started) })),
            }
          : {}),
        exits,
        load_avg_1m: loads.map((l) => Number(l.toFixed(2))),
      },
    };
  } finally {
    await endFlowRun({ id, partitions: PARTITIONS, brokers, input, workers: all, watcher, producer, admin });
    if (!process.env.BENCH_KEEP_PROBES) fs.rmSync(probeDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const commit = productCommit();
  const started = Date.now();
  const only = process.env.BENCH_REBALANCE_ONLY;
  const sides = (['ours', 'streams'] as const).filter((s) => only === undefined || only === s);
  if (sides.includes('streams')) ensureStreamsJar();
  const runs = new Map<Side, SideRun>();
  for (const side of sides) runs.set(side, await runSide(side, started));

  const ours = runs.get('ours');
  const streams = runs.get('streams');
  const figures: Record<string, number> = {
    ...(ours?.figures ?? {}),
    ...Object.fromEntries(Object.entries(streams?.figures ?? {}).map(([k, v]) => [`streams_${k}`, v])),
    partitions: PARTITIONS,
    rate_records_per_s: RATE,
    session_timeout_ms: SESSION_TIMEOUT_MS,
    run_s: Math.round((Date.now() - started) / 1000),
  };
  printTable(
    `rebalance: ${PARTITIONS} partitions, ${RATE} records/s; per step and partition the longest time without folding (ms), split by whether the partition kept its owner`,
    [...(ours?.rows ?? []), ...(streams?.rows ?? [])],
  );
  const headline = [
    'rebalance_pause_kept_p99_ms',
    'rebalance_pause_moved_p99_ms',
    'kill_pause_kept_p99_ms',
    'kill_pause_moved_max_ms',
    'rolling_restart_max_stall_s',
    'rolling_restart_spurious_fences',
    'fence_lines_all',
    'baseline_gap_p99_ms',
    'records_lost',
    'records_duplicated',
    'keys_mismatched',
    'load_avg_1m_max',
  ];
  printTable(
    `rebalance figures (ours: ${OUR_PROTOCOL}, classic protocol; kafka-streams: cooperative, classic protocol)`,
    headline.map((figure) => ({ figure, ours: ours?.figures[figure] ?? '-', 'kafka-streams': streams?.figures[figure] ?? '-' })),
  );
  const file = writeResults('rebalance', figures, {
    versions: { kafka: '4.3.1', ...(streams ? { 'kafka-streams': STREAMS_VERSION } : {}) },
    productCommit: commit,
    notes: {
      protocol:
        `ours: the classic consumer group protocol with ${OUR_PROTOCOL} rebalancing (the kafkajs port) as of the product commit; streams_*: Kafka Streams (bench/anchors/kafka-streams RebalanceApp) on the classic protocol with its cooperative rebalancing, exactly-once v2, commit 1 s, acceptable.recovery.lag max`,
      flow: 'bench/flows/offset-hash-probe.ts (test/fixtures/offset-hash-flow.ts with a fold probe), transactional Kafka persistence every second; Kafka Streams: the same count + offset hash per key in a changelogged store',
      scenario: '3 members; a 4th joins; one leaves (SIGTERM); one killed -9; each remaining one restarted in turn (SIGTERM + replacement started at once); steady load throughout, each side on its own topic, ours first',
      keys: KEYS,
      persist_every_ms: PERSIST_EVERY_MS,
      steady_ms_between_steps: STEADY_MS,
      measured:
        'fold probe: per member a file of `<epoch ms> <partition> <offset>`, the first record of a partition after 10 ms without a line; a gap between two lines of a partition is time without folding (over-stated by <= 10 ms; the load sends every 50 ms: baseline_gap_* is the floor). kept/moved: the member of the last line before the step vs the last line in the step window. p99 over (partition, step) of join, leave and the rolling steps; the kill apart',
      fences:
        'ours: worker lines at warn+ matching fenc|stale|illegal generation naming a partition (field, or the partition workflow id of the Temporal SDK\'s "Activity failed" lines); spurious when the logging worker owned the partition before and after the step. streams: lines matching ProducerFenced|InvalidProducerEpoch|TaskMigrated|fenced, counted only',
      exactness: 'records_lost/duplicated/keys_mismatched after the load stopped and every member caught up and stopped: ours compareOffsetHash (persisted state via inspect), streams_* the store changelog read committed; both against a plain fold of the input topic',
      ...(ours ? { ours: ours.notes } : {}),
      ...(streams ? { streams: streams.notes } : {}),
    },
  });
  process.stdout.write(`results: ${file}\n`);
  if ((ours?.lostDuplicatedMismatched ?? 0) + (streams?.lostDuplicatedMismatched ?? 0) > 0) process.exitCode = 1;
}

runMain(main);
