// State larger than memory (issue 30): the bounded state cache (`KFT_STATE_CACHE_MAX_KEYS` with
// local state, docs/local-state.md "Bounded state cache") on real worker processes of
// bench/flows/totals.ts (a count and a total per key, transactional Kafka persistence, persistEvery
// 1 s), one local broker, 24 partitions, every input produced for the run (bench/lib/keyed-records.ts).
//
// 1. Fold rate with the state 10x the cache (`fold_vs_in_memory_uniform`, `_zipf`). Three
//    contestants, each a worker process with its own input topic (the same records), group,
//    snapshot topic and state directory: `cached` (local state, the cache bounded to FOLD_BOUND
//    keys), `local` (local state, no bound: every key in memory — the same persistence and
//    local-store work without the bound) and `memory` (no local state: today's default). All three
//    start and run every partition first; then phase by phase (`load`: FOLD_KEYS records, every key
//    once — state of FOLD_KEYS keys, 10x the bound; then FOLD_ROUNDS rounds of `uniform`:
//    FOLD_RECORDS records, uniform random keys, and `zipf`: FOLD_RECORDS records, Zipf(1.0) keys,
//    rank r → key k<r>) each contestant in turn (order rotated per phase), idle and caught up, gets
//    the phase produced into its topic: fold rate = records ÷ (first record produced → the group's
//    committed offsets at the end; the producer is several times faster than the fold). Ratio:
//    cached ÷ local (the figure; cached ÷ memory beside it) per round, median of the rounds. Then
//    SIGTERM, and every contestant's persisted state is checked key by key against a fold of what
//    was produced.
// 2. Restarts (`first_fold_ms_1m_keys`, `_10k_keys`, `restore_full_vs_checkpoint_1m`). The cached
//    contestant (FOLD_KEYS keys in its store) and a small flow of SMALL_KEYS keys (same bound),
//    RESTART_RUNS rounds of, each after a SIGTERM stop and RESTART_RECORDS records produced while
//    stopped: a restart onto the intact store (checkpoint) of the big flow, then of the small one;
//    the same with their partition workflows terminated before (fresh-workflows: the new worker's
//    assignment starts them afresh, no history to replay — the Temporal side's share out of the
//    picture); then the big one's state directory deleted (full restore). Timed from the worker's
//    `partitions assigned` log line (from its spawn beside it) to the first record folded (the
//    flow's BENCH FIRST_FOLD), to the last partition's restore done (`partition recovered`) and to
//    every partition folding (`recovered`). Medians. Partition 0's workflow history length at each
//    start is recorded (a new worker replays it before the partition can run).
// 3. Memory (`rss_mb_10m_keys`). A topic of MEM_KEYS records, every key once; one worker with the
//    cache bounded to MEM_BOUND folds and persists all of them; its RssAnon (/proc/<pid>/status:
//    the heap and every other anonymous mapping; LMDB's memory-mapped pages are file pages, in the
//    page cache) and VmRSS sampled every 500 ms, reported SETTLE_MS after the committed offsets
//    reached the end, and the peak. Then the same input all in memory (no bound, no local state):
//    the same figures, or where it failed (heap limit, crash, stall) and at how many keys.
// 4. Kafka Streams (TotalsApp, RocksDB, exactly-once v2) on the memory topic: its RSS likewise.
//
// `npm run bench:state [-- --quick]`: full 10M / 1M keys (quick 1M / 100k, bound 100k / 10k).
// BENCH_STATE_PARTS=fold,restart,memory,streams runs only those parts; the others' figures are
// kept from the results file if it is of the same size (quick or full), each part named in
// notes.kept with the commit and time it was measured at. `restart` without `fold` runs only the
// cached contestant through the phases (the store and snapshot topic its restarts need), no rates.
// BENCH_STATE_KEEP_LOGS=1 keeps the workers' logs (their directory is printed).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { isQuick, sized } from './lib/args';
import { runKafkaStreams, STREAMS_VERSION } from './lib/anchors';
import { readEndOffsets, waitForCommittedEnd } from './lib/committed';
import { deleteRunTopicsAndGroup, runMain, terminateFlowWorkflows } from './lib/flow-workers';
import {
  createTopic,
  type KeyPicker,
  KeyTotals,
  produceKeyed,
  sequentialKeys,
  uniformKeys,
  ZipfSampler,
  zipfKeys,
} from './lib/keyed-records';
import { deleteGroups, uniqueName } from './lib/records';
import { productCommit, resultsDir, writeResults } from './lib/results';
import { readMemory, StateWorker } from './lib/state-worker';
import { processCpuMs } from './lib/cpu';
import { sumOf } from './lib/prometheus';
import { printTable, type Row } from './lib/table';
import { median } from './lib/timing';
import { prng } from '../chaos/schedule';
import { brokersFromEnv } from '../config/env';
import type { Client } from '@temporalio/client';
import { partitionWorkflowId } from '../workflows/partition-workflow';
import { connectTemporal } from '../workers/connect/temporal-connection';
import { createKafkaClient, PartitionReader } from '../kafka';
import { snapshotFormat } from '../persistence/kafka';
import type { Totals } from './lib/records';

const PARTITIONS = 24;
const MEM_KEYS = sized(10_000_000, 1_000_000);
const MEM_BOUND = sized(1_000_000, 100_000);
const FOLD_KEYS = sized(1_000_000, 100_000);
const FOLD_BOUND = sized(100_000, 10_000);
const FOLD_RECORDS = sized(2_000_000, 200_000);
/** Rounds of the uniform and Zipf phases: the ratios are the medians of each round's. */
const FOLD_ROUNDS = 3;
const SMALL_KEYS = 10_000;
const RESTART_RUNS = sized(3, 2);
/** Records produced while a worker is stopped, before each restart: a few per partition. */
const RESTART_RECORDS = 240;
const SETTLE_MS = sized(15_000, 5_000);
const ZIPF_S = 1.0;
/** The in-memory run at MEM_KEYS: no progress for this long and it is stopped. */
const STALL_MS = 180_000;

const PARTS = new Set((process.env.BENCH_STATE_PARTS ?? 'fold,restart,memory,streams').split(',').map((s) => s.trim()));

type Contestant = 'cached' | 'local' | 'memory';

interface Flow {
  name: string;
  label: string;
  topic: string;
  snapshotTopic: string;
  stateDir?: string;
  maxKeys?: number;
}

interface Ctx {
  run: string;
  root: string;
  logDir: string;
  brokers: string[];
  /** Every flow started, for the clean-up. */
  flows: Flow[];
}

const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;

function newFlow(ctx: Ctx, label: string, topic: string, opts: { local: boolean; maxKeys?: number }): Flow {
  const name = `${ctx.run}-${label}`;
  const flow: Flow = {
    name,
    label,
    topic,
    snapshotTopic: `${name}-snapshots`,
    stateDir: opts.local ? path.join(ctx.root, label) : undefined,
    maxKeys: opts.maxKeys,
  };
  ctx.flows.push(flow);
  return flow;
}

/** Every worker started, so an interrupted run can stop them. */
const workersStarted = new Set<StateWorker>();

async function startWorker(ctx: Ctx, flow: Flow, records: number, tag: string): Promise<StateWorker> {
  const w = await StateWorker.start({
    name: `${flow.label}/${tag}`,
    flow: flow.name,
    topic: flow.topic,
    snapshotTopic: flow.snapshotTopic,
    records,
    partitions: PARTITIONS,
    stateDir: flow.stateDir,
    maxKeys: flow.maxKeys,
    logFile: path.join(ctx.logDir, `${flow.label}.log`),
    brokers: ctx.brokers,
  });
  workersStarted.add(w);
  return w;
}

const describeExit = (w: StateWorker) => `exit ${w.process.exitCode ?? w.process.signalCode}`;

/** Waits for the flow's committed offsets to reach `end`; fails if the worker exits (or `stalled` says so). */
async function untilCaughtUp(ctx: Ctx, w: StateWorker, end: Map<number, bigint>, label: string, timeoutMs = 1_800_000, stalled?: () => Error | undefined): Promise<number> {
  await waitForCommittedEnd({
    groupId: w.o.flow,
    topic: w.o.topic,
    end,
    brokers: ctx.brokers,
    timeoutMs,
    pollMs: 100,
    label,
    failure: () => (w.running ? stalled?.() : new Error(`worker ${w.o.name} ${describeExit(w)}:\n${w.tail.slice(-15).join('\n')}`)),
  });
  return performance.now();
}

interface FoldRun {
  contestant: string;
  phase: string;
  round: number;
  records: number;
  /** Records ÷ (the phase's first record produced → the group's committed offsets at the end). */
  records_per_s: number;
  /** The same to the last record folded (the worker's kafka_flow_records_folded_total): without the last commit. */
  fold_only_records_per_s?: number;
  window_ms: number;
  /** The window in ms since the worker's spawn (to cut a --cpu-prof profile: bench/lib/profile-summary.ts --from --to). */
  window_since_spawn_ms: [number, number];
  produce_ms: number;
  cpu_us_per_record?: number;
  /** Live keys 2 s after the end (the last persist's unloads done), keys unloaded in the phase. */
  live_keys_end?: number;
  evicted_keys?: number;
  rss_anon_mb_end?: number;
  rss_anon_mb_peak: number;
  vm_rss_mb_peak: number;
  /** Partitions recovered again in the window (`kept in-memory state`: paused until their workflow ran the fold loop again). */
  partitions_paused: number;
}

async function foldedTotal(w: StateWorker): Promise<number | undefined> {
  const m = await w.metrics();
  return m ? sumOf(m, 'kafka_flow_records_folded_total') : undefined;
}

/** Until every partition of the worker runs (its recovery done, folding). */
async function untilRunning(w: StateWorker, timeoutMs = 300_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(w.allRunning && Number.isFinite(w.allRunning.folded))) {
    if (!w.running) throw new Error(`worker ${w.o.name} ${describeExit(w)}:\n${w.tail.slice(-15).join('\n')}`);
    if (performance.now() > deadline) throw new Error(`worker ${w.o.name}: not every partition running after ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** A worker of `flow`, every partition running. */
async function runningWorker(ctx: Ctx, flow: Flow, records: number, tag: string): Promise<StateWorker> {
  const w = await startWorker(ctx, flow, records, tag);
  try {
    await untilRunning(w);
    return w;
  } catch (err) {
    noteProblems(flow, tag, w);
    w.kill();
    throw err;
  }
}

/**
 * The running worker `w` of `flow`, idle (caught up), folds a phase produced now into its topic:
 * timed from the first record produced to the committed offsets at the end (the producer, at
 * several times the fold's rate, is done long before).
 */
async function foldPhase(ctx: Ctx, flow: Flow, w: StateWorker, phase: Phase, from: number, expect: KeyTotals): Promise<FoldRun> {
  const before = await foldedTotal(w);
  const evictedBefore = (await w.keys())?.evicted ?? 0;
  if (before === undefined) throw new Error(`${flow.label}: its /metrics did not answer`);
  const cpuFrom = processCpuMs(w.pid);
  const samplesFrom = w.samples.length;
  const started = performance.now();
  let foldedAt: number | undefined;
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const n = await foldedTotal(w);
      if (n !== undefined && n >= before + phase.records) {
        foldedAt = performance.now();
        return;
      }
      await sleep(100);
    }
  })();
  let produceMs: number;
  let reached: number;
  try {
    produceMs = await produceKeyed({ topic: flow.topic, from, records: phase.records, keyOf: phase.keyOf(), expect, brokers: ctx.brokers, label: `produce ${phase.name} for ${flow.label}` });
    const end = await readEndOffsets(flow.topic, ctx.brokers);
    reached = await untilCaughtUp(ctx, w, end, `${flow.label} ${phase.name}`);
    const cpuTo = processCpuMs(w.pid);
    // The fold-only watcher polls every 100 ms: it has seen the end by now or sees it next.
    await Promise.race([watch, sleep(1_000)]);
    watching = false;
    // The last persist's unloads: the live keys as the bound leaves them.
    await sleep(2_000);
    const keys = await w.keys();
    const mem = w.sample();
    const window = w.samples.slice(samplesFrom);
    return {
      contestant: flow.label,
      phase: phase.name,
      round: phase.round,
      records: phase.records,
      records_per_s: Math.round((phase.records * 1000) / (reached - started)),
      fold_only_records_per_s: foldedAt === undefined ? undefined : Math.round((phase.records * 1000) / (foldedAt - started)),
      window_ms: Math.round(reached - started),
      window_since_spawn_ms: [Math.round(started - w.spawnedAt), Math.round(reached - w.spawnedAt)],
      produce_ms: Math.round(produceMs),
      cpu_us_per_record: cpuFrom === undefined || cpuTo === undefined ? undefined : round(((cpuTo - cpuFrom) * 1000) / phase.records, 2),
      live_keys_end: keys?.live,
      evicted_keys: keys === undefined ? undefined : keys.evicted - evictedBefore,
      rss_anon_mb_end: mem ? Math.round(mem.rssAnon) : undefined,
      rss_anon_mb_peak: Math.round(Math.max(0, ...window.map((x) => x.rssAnon))),
      vm_rss_mb_peak: Math.round(Math.max(0, ...window.map((x) => x.vmRss))),
      partitions_paused: w.keptInMemory.filter((at) => at >= started && at <= reached).length,
    };
  } finally {
    watching = false;
  }
}

/** A worker of `flow` folds what its topic holds, then stops gracefully. */
async function foldAll(ctx: Ctx, flow: Flow, records: number, tag: string): Promise<void> {
  const end = await readEndOffsets(flow.topic, ctx.brokers);
  const w = await startWorker(ctx, flow, records, tag);
  try {
    await untilCaughtUp(ctx, w, end, `${flow.label} ${tag}`);
    const stop = await w.stop();
    if (stop.code !== 0) throw new Error(`${flow.label} ${tag}: the worker's graceful stop ended with ${stop.code}`);
  } finally {
    noteProblems(flow, tag, w);
    w.kill();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Warnings and errors of every worker by kind: how many, in which runs, the first one. */
const problems = new Map<string, { count: number; level: number; runs: string[]; first: string }>();

function noteProblems(flow: Flow, step: string, w: StateWorker): void {
  for (const [kind, p] of w.problems) {
    const seen = problems.get(kind) ?? { count: 0, level: p.level, runs: [], first: p.first };
    seen.count += p.count;
    seen.runs.push(`${flow.label}/${step}`);
    problems.set(kind, seen);
  }
}

/**
 * The flow's persisted state (its snapshot topic, read to the end, latest record per key) against
 * what was produced: keys whose count or total differ, keys missing, keys that should not be there.
 */
async function checkPersisted(ctx: Ctx, flow: Flow, expect: KeyTotals): Promise<{ keys: number; wrong: number; missing: number; extra: number; records_read: number }> {
  const client = createKafkaClient({ brokers: ctx.brokers, clientId: 'bench-state-check', logLevel: 'error' });
  const reader = new PartitionReader(client);
  const format = snapshotFormat<Totals>();
  const count = new Uint32Array(expect.keys);
  const total = new Float64Array(expect.keys);
  let extra = 0;
  let recordsRead = 0;
  try {
    for (let p = 0; p < PARTITIONS; p++) {
      await reader.read({
        topic: flow.snapshotTopic,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            recordsRead++;
            const id = Number(String(r.key).slice(1));
            if (!(Number.isInteger(id) && id >= 0 && id < expect.keys)) {
              extra++;
              continue;
            }
            if (r.value === null) {
              count[id] = 0;
              total[id] = 0;
              continue;
            }
            const stored = format.decode(r.value);
            if ('deleted' in stored) {
              count[id] = 0;
              total[id] = 0;
            } else {
              count[id] = stored.state.count;
              total[id] = stored.state.total;
            }
          }
        },
      });
    }
  } finally {
    await reader.close();
  }
  let wrong = 0;
  let missing = 0;
  let keys = 0;
  for (let id = 0; id < expect.keys; id++) {
    if (count[id]! > 0) keys++;
    if (expect.count[id]! === 0) {
      if (count[id]! > 0) extra++;
    } else if (count[id]! === 0) missing++;
    else if (count[id] !== expect.count[id] || total[id] !== expect.total[id]) wrong++;
  }
  return { keys, wrong, missing, extra, records_read: recordsRead };
}

// 1. Fold rate ---------------------------------------------------------------------------------

interface Phase {
  name: 'load' | 'uniform' | 'zipf';
  round: number;
  records: number;
  /** A fresh picker: every contestant gets the same keys. */
  keyOf: () => KeyPicker;
}

interface FoldSection {
  runs: FoldRun[];
  checks: Record<string, Awaited<ReturnType<typeof checkPersisted>>>;
  starts: Record<string, { spawn_to_all_running_ms: number; keys_loaded: number; from_topic: number }>;
  stops: Record<string, { code: number | null; ms: number }>;
  cached: Flow;
  expect: KeyTotals;
  produced: number;
  zipfHeadShare: number;
}

async function foldSection(ctx: Ctx): Promise<FoldSection> {
  // Without the fold part (restarts only): the cached contestant alone goes through the phases, so
  // that its store and snapshot topic are those a full run restarts from; no rates.
  const rates = PARTS.has('fold');
  const order: Contestant[] = rates ? ['cached', 'local', 'memory'] : ['cached'];
  const flows = {} as Record<Contestant, Flow>;
  const expects = {} as Record<Contestant, KeyTotals>;
  for (const c of order) {
    const label = `fold-${c}`;
    const topic = `${ctx.run}-${label}`;
    await createTopic(topic, PARTITIONS, ctx.brokers);
    flows[c] = newFlow(ctx, label, topic, c === 'cached' ? { local: true, maxKeys: FOLD_BOUND } : { local: c === 'local' });
    expects[c] = new KeyTotals(FOLD_KEYS);
  }
  const phases: Phase[] = [{ name: 'load', round: 0, records: FOLD_KEYS, keyOf: () => sequentialKeys(FOLD_KEYS) }];
  for (let r = 1; r <= FOLD_ROUNDS; r++) {
    phases.push({ name: 'uniform', round: r, records: FOLD_RECORDS, keyOf: () => uniformKeys(FOLD_KEYS, 30_000 + 2 * r) });
    phases.push({ name: 'zipf', round: r, records: FOLD_RECORDS, keyOf: () => zipfKeys(FOLD_KEYS, ZIPF_S, 30_001 + 2 * r) });
  }
  const total = phases.reduce((n, p) => n + p.records, 0);
  const workers = {} as Record<Contestant, StateWorker>;
  const starts: FoldSection['starts'] = {};
  const stops: FoldSection['stops'] = {};
  const runs: FoldRun[] = [];
  try {
    // All three run (idle but one) through the phases, so each folds beside the same neighbours.
    for (const c of order) {
      workers[c] = await runningWorker(ctx, flows[c], total, 'fold');
      starts[c] = {
        spawn_to_all_running_ms: Math.round(workers[c].allRunning!.at - workers[c].spawnedAt),
        keys_loaded: workers[c].recovered.reduce((n, r) => n + r.keys, 0),
        from_topic: workers[c].restored.reduce((n, r) => n + r.fromTopic, 0),
      };
    }
    let produced = 0;
    for (const [i, phase] of phases.entries()) {
      // Rotated: each contestant goes first in turn.
      for (let j = 0; j < order.length; j++) {
        const c = order[(i + j) % order.length]!;
        const r = await foldPhase(ctx, flows[c], workers[c], phase, produced, expects[c]);
        runs.push(r);
        process.stdout.write(
          `${phase.name}${phase.round > 0 ? ` ${phase.round}` : ''} ${c}: ${r.records_per_s.toLocaleString('en-US')} records/s (fold only ${r.fold_only_records_per_s?.toLocaleString('en-US')}), live keys ${r.live_keys_end}, RssAnon ${r.rss_anon_mb_end} MiB (peak ${r.rss_anon_mb_peak})\n`,
        );
      }
      produced += phase.records;
    }
    for (const c of order) {
      const stop = await workers[c].stop();
      stops[c] = { code: stop.code, ms: Math.round(stop.ms) };
      if (stop.code !== 0) throw new Error(`${c}: the worker's graceful stop ended with ${stop.code}:\n${workers[c].tail.slice(-15).join('\n')}`);
    }
    const checks: FoldSection['checks'] = {};
    for (const c of order) {
      checks[c] = await checkPersisted(ctx, flows[c], expects[c]);
      process.stdout.write(`persisted state of ${c}: ${JSON.stringify(checks[c])}\n`);
    }
    const zipfHeadShare = new ZipfSampler(FOLD_KEYS, ZIPF_S, prng(1)).headShare(FOLD_BOUND);
    return { runs, checks, starts, stops, cached: flows.cached, expect: expects.cached, produced, zipfHeadShare };
  } finally {
    for (const c of order) {
      if (!workers[c]) continue;
      noteProblems(flows[c], 'fold', workers[c]);
      workers[c].kill();
    }
  }
}

// 2. Restarts ---------------------------------------------------------------------------------

interface RestartRun {
  flow: string;
  /** checkpoint: onto the intact store; fresh-workflows: the same with the partition workflows terminated before (none to replay); full: the state directory deleted. */
  kind: 'checkpoint' | 'fresh-workflows' | 'full';
  keys: number;
  /** Events of partition 0's workflow when the worker started: what its first workflow task replays (0: a new workflow). */
  history_events: number | undefined;
  assigned_to_first_fold_ms: number;
  spawn_to_first_fold_ms: number;
  spawn_to_assigned_ms: number;
  /** → the last partition's restore done (its `partition recovered` line: the store checked, the delta read). */
  assigned_to_all_restored_ms?: number;
  /** → the first and the last partition folding (their `recovered` lines: the partition workflow's recover activity done). */
  assigned_to_first_running_ms?: number;
  assigned_to_all_running_ms?: number;
  restore_ms_max: number;
  restore_ms_sum: number;
  from_topic: number;
  from_local: number;
  keys_loaded: number;
  partitions_restored: number;
  /** Partitions recovered again after running (`kept in-memory state`). */
  partitions_paused: number;
  rss_anon_mb: number;
  warnings: number;
}

/** Events in the history of partition 0's workflow (the current run): what a new worker replays. */
async function historyLength(temporal: Client, flow: Flow): Promise<number | undefined> {
  try {
    const d = await temporal.workflow.getHandle(partitionWorkflowId({ flow: flow.name, topic: flow.topic, partition: 0 })).describe();
    return d.status.name === 'RUNNING' ? d.historyLength : 0;
  } catch {
    return undefined;
  }
}

async function restartOnce(ctx: Ctx, temporal: Client, flow: Flow, keys: number, expect: KeyTotals, from: number, kind: RestartRun['kind'], tag: string): Promise<RestartRun> {
  await produceKeyed({ topic: flow.topic, from, records: RESTART_RECORDS, keyOf: uniformKeys(keys, from), expect, brokers: ctx.brokers, label: `produce ${flow.label} ${tag}` });
  // The Temporal side out of the picture: the next worker's assignment starts every partition workflow afresh.
  if (kind === 'fresh-workflows') await terminateFlowWorkflows(flow.name, flow.topic, PARTITIONS);
  const history = await historyLength(temporal, flow);
  const end = await readEndOffsets(flow.topic, ctx.brokers);
  const w = await startWorker(ctx, flow, RESTART_RECORDS, tag);
  try {
    await untilCaughtUp(ctx, w, end, `${flow.label} ${tag}`, 600_000);
    // For assigned_to_all_running_ms; a partition still not running after this is left out (undefined).
    await untilRunning(w, 120_000).catch(() => undefined);
    const assigned = w.assignedAt;
    if (w.firstFoldAt === undefined || assigned === undefined) throw new Error(`${flow.label} ${tag}: no first fold or assignment seen`);
    const mem = w.sample();
    const since = (at: number | undefined) => (at === undefined ? undefined : Math.round(at - assigned));
    const stop = await w.stop();
    if (stop.code !== 0) throw new Error(`${flow.label} ${tag}: the worker's graceful stop ended with ${stop.code}`);
    return {
      flow: flow.label,
      kind,
      keys,
      history_events: history,
      assigned_to_first_fold_ms: Math.round(w.firstFoldAt - assigned),
      spawn_to_first_fold_ms: Math.round(w.firstFoldAt - w.spawnedAt),
      spawn_to_assigned_ms: Math.round(assigned - w.spawnedAt),
      assigned_to_all_restored_ms: since(w.recovered.length >= PARTITIONS ? Math.max(...w.recovered.map((r) => r.at)) : undefined),
      assigned_to_first_running_ms: since(w.firstRunningAt),
      assigned_to_all_running_ms: since(w.allRunning?.at),
      restore_ms_max: Math.max(0, ...w.restored.map((r) => r.ms)),
      restore_ms_sum: w.restored.reduce((n, r) => n + r.ms, 0),
      from_topic: w.restored.reduce((n, r) => n + r.fromTopic, 0),
      from_local: w.restored.reduce((n, r) => n + r.fromLocal, 0),
      keys_loaded: w.recovered.reduce((n, r) => n + r.keys, 0),
      partitions_restored: w.restored.length,
      partitions_paused: w.keptInMemory.length,
      rss_anon_mb: Math.round(mem?.rssAnon ?? 0),
      warnings: w.problemCount,
    };
  } finally {
    noteProblems(flow, tag, w);
    w.kill();
  }
}

interface RestartSection {
  runs: RestartRun[];
  checks: Record<string, Awaited<ReturnType<typeof checkPersisted>>>;
}

async function restartSection(ctx: Ctx, fold: FoldSection): Promise<RestartSection> {
  // The small flow: SMALL_KEYS keys, the same bound, its own topic.
  const smallTopic = `${ctx.run}-small`;
  await createTopic(smallTopic, PARTITIONS, ctx.brokers);
  const small = newFlow(ctx, 'small-cached', smallTopic, { local: true, maxKeys: FOLD_BOUND });
  const smallExpect = new KeyTotals(SMALL_KEYS);
  await produceKeyed({ topic: smallTopic, from: 0, records: SMALL_KEYS, keyOf: sequentialKeys(SMALL_KEYS), expect: smallExpect, brokers: ctx.brokers });
  let smallProduced = SMALL_KEYS;
  await foldAll(ctx, small, SMALL_KEYS, 'load');

  const big = fold.cached;
  let bigProduced = fold.produced;
  const runs: RestartRun[] = [];
  const show = (r: RestartRun) =>
    process.stdout.write(
      `${r.flow} ${r.kind} restart (history ${r.history_events} events): assigned → first fold ${r.assigned_to_first_fold_ms} ms (spawn → ${r.spawn_to_first_fold_ms}), all restored ${r.assigned_to_all_restored_ms} ms, first / all running ${r.assigned_to_first_running_ms} / ${r.assigned_to_all_running_ms} ms, restores max ${r.restore_ms_max} ms, ${r.from_local} from local, ${r.from_topic} from the topic, ${r.keys_loaded} keys loaded\n`,
    );
  const temporal = await connectTemporal();
  try {
    const next = async (flow: Flow, kind: RestartRun['kind'], tag: string) => {
      const isBig = flow === big;
      const r = await restartOnce(ctx, temporal.client, flow, isBig ? FOLD_KEYS : SMALL_KEYS, isBig ? fold.expect : smallExpect, isBig ? bigProduced : smallProduced, kind, tag);
      if (isBig) bigProduced += RESTART_RECORDS;
      else smallProduced += RESTART_RECORDS;
      runs.push(r);
      show(r);
    };
    for (let i = 1; i <= RESTART_RUNS; i++) {
      await next(big, 'checkpoint', `restart-${i}`);
      await next(small, 'checkpoint', `restart-${i}`);
      await next(big, 'fresh-workflows', `fresh-${i}`);
      await next(small, 'fresh-workflows', `fresh-${i}`);
      fs.rmSync(big.stateDir!, { recursive: true, force: true });
      await next(big, 'full', `full-${i}`);
    }
  } finally {
    await temporal.close().catch(() => undefined);
  }
  const checks = { [big.label]: await checkPersisted(ctx, big, fold.expect), [small.label]: await checkPersisted(ctx, small, smallExpect) };
  for (const [label, c] of Object.entries(checks)) process.stdout.write(`persisted state of ${label} after the restarts: ${JSON.stringify(c)}\n`);
  return { runs, checks };
}

// 3. Memory --------------------------------------------------------------------------------------

interface MemoryRun {
  contestant: string;
  keys: number;
  outcome: string;
  /** Records (= keys) folded when it ended or failed. */
  folded: number;
  rss_anon_mb?: number;
  vm_rss_mb?: number;
  rss_file_mb?: number;
  rss_anon_mb_at_caught_up?: number;
  rss_anon_mb_peak: number;
  vm_rss_mb_peak: number;
  live_keys?: number;
  evicted_keys_total?: number;
  /** The main thread's V8 heap and external memory then (its /metrics), MiB. */
  heap?: { used: number; total: number; external: number };
  spawn_to_caught_up_s?: number;
  steady_records_per_s?: number;
  state_dir_mb?: number;
  /** Partitions recovered again after running (`kept in-memory state`). */
  partitions_paused?: number;
  /** RssAnon (MiB) at each tenth of the keys folded, to see the growth. */
  growth: Array<{ folded: number; rss_anon_mb: number; vm_rss_mb: number }>;
  tail?: string[];
}

function dirMb(dir: string): number | undefined {
  try {
    return round(Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8' }).split('\t')[0]) / 1024);
  } catch {
    return undefined;
  }
}

function growthOf(w: StateWorker, keys: number): MemoryRun['growth'] {
  const out: MemoryRun['growth'] = [];
  let next = keys / 10;
  for (const s of w.samples) {
    if (s.folded !== undefined && s.folded >= next) {
      out.push({ folded: s.folded, rss_anon_mb: Math.round(s.rssAnon), vm_rss_mb: Math.round(s.vmRss) });
      while (next <= s.folded) next += keys / 10;
    }
  }
  return out;
}

/** What ended a worker that could not hold its keys: V8's fatal error if it printed one, its exit, or the error. */
function failureOf(w: StateWorker, err: Error): string {
  const fatal = w.tail.find((l) => l.includes('FATAL ERROR'));
  const exit = w.running ? '' : ` (${describeExit(w)})`;
  return fatal ? `${fatal.replace(/^.*FATAL ERROR: /, '').trim()}${exit}` : `${err.message.split('\n')[0]!.replace(/:$/, '')}`;
}

/**
 * A worker of `flow` folds the whole topic (`keys` records, every key once). Given `deadlineMs`
 * (the all-in-memory run: past its heap it folds on at a crawl, collecting garbage), it is stopped
 * there and recorded as not finished.
 */
async function memoryRun(ctx: Ctx, flow: Flow, keys: number, deadlineMs?: number): Promise<MemoryRun> {
  const end = await readEndOffsets(flow.topic, ctx.brokers);
  const w = await startWorker(ctx, flow, keys, 'memory');
  let lastProgress = performance.now();
  let lastFolded = 0;
  const stalled = () => {
    const folded = w.foldedFrom(new Map());
    if (folded > lastFolded) {
      lastFolded = folded;
      lastProgress = performance.now();
    }
    if (deadlineMs !== undefined && performance.now() - w.spawnedAt > deadlineMs) {
      return new Error(`not caught up ${Math.round(deadlineMs / 1000)} s after its start (1.5x the cached run's time): ${folded} records folded`);
    }
    return performance.now() - lastProgress > STALL_MS ? new Error(`no progress for ${STALL_MS / 1000} s at ${folded} records folded`) : undefined;
  };
  const base = { contestant: flow.label, keys };
  try {
    let reached: number;
    try {
      reached = await untilCaughtUp(ctx, w, end, `${flow.label} ${keys.toLocaleString('en-US')} keys`, 3_600_000, stalled);
    } catch (err) {
      // Could not hold them: what happened, and how far it got.
      const last = w.sample() ?? w.samples.at(-1);
      const heap = w.running ? await w.heap() : undefined;
      const result: MemoryRun = {
        ...base,
        outcome: failureOf(w, err as Error),
        folded: w.foldedFrom(new Map()),
        rss_anon_mb: last ? Math.round(last.rssAnon) : undefined,
        vm_rss_mb: last ? Math.round(last.vmRss) : undefined,
        rss_anon_mb_peak: Math.round(w.peak('rssAnon')),
        vm_rss_mb_peak: Math.round(w.peak('vmRss')),
        heap,
        growth: growthOf(w, keys),
        tail: w.tail.slice(-20).map((l) => l.slice(0, 500)),
      };
      return result;
    }
    const caughtUp = w.sample();
    // Every key folded and its snapshot committed: the local writes, persists and GC settle.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const settled = w.sample();
    const k = await w.keys();
    const heap = await w.heap();
    const stop = await w.stop();
    return {
      ...base,
      outcome: stop.code === 0 ? 'caught up' : `caught up; stop ended with ${stop.code}`,
      folded: keys,
      rss_anon_mb: settled ? Math.round(settled.rssAnon) : undefined,
      vm_rss_mb: settled ? Math.round(settled.vmRss) : undefined,
      rss_file_mb: settled ? Math.round(settled.rssFile) : undefined,
      rss_anon_mb_peak: Math.round(w.peak('rssAnon')),
      vm_rss_mb_peak: Math.round(w.peak('vmRss')),
      live_keys: k?.live,
      evicted_keys_total: k?.evicted,
      heap,
      spawn_to_caught_up_s: round((reached - w.spawnedAt) / 1000, 1),
      steady_records_per_s: w.firstFoldAt === undefined ? undefined : Math.round((keys * 1000) / (reached - w.firstFoldAt)),
      state_dir_mb: flow.stateDir ? dirMb(flow.stateDir) : undefined,
      partitions_paused: w.keptInMemory.length,
      rss_anon_mb_at_caught_up: caughtUp ? Math.round(caughtUp.rssAnon) : undefined,
      growth: growthOf(w, keys),
    };
  } finally {
    noteProblems(flow, 'memory', w);
    w.kill();
    await w.exited;
  }
}

interface MemorySection {
  topic: string;
  produceMs: number;
  cached: MemoryRun;
  memory?: MemoryRun;
}

async function memorySection(ctx: Ctx): Promise<MemorySection> {
  const topic = `${ctx.run}-mem`;
  await createTopic(topic, PARTITIONS, ctx.brokers);
  const produceMs = Math.round(await produceKeyed({ topic, from: 0, records: MEM_KEYS, keyOf: sequentialKeys(MEM_KEYS), brokers: ctx.brokers, label: `produce ${MEM_KEYS} keys` }));
  const cachedFlow = newFlow(ctx, 'mem-cached', topic, { local: true, maxKeys: MEM_BOUND });
  const cached = await memoryRun(ctx, cachedFlow, MEM_KEYS);
  process.stdout.write(`memory, cached: ${JSON.stringify({ ...cached, growth: undefined })}\n`);
  // Its store is not needed any more: the disk back before the next run.
  fs.rmSync(cachedFlow.stateDir!, { recursive: true, force: true });
  // Past its heap the all-in-memory worker folds on at a crawl: it gets 1.5x the cached run's time (at least 2 min).
  const deadline = Math.max(120_000, 1.5 * (cached.spawn_to_caught_up_s ?? 600) * 1000);
  const memory = await memoryRun(ctx, newFlow(ctx, 'mem-memory', topic, { local: false }), MEM_KEYS, deadline);
  process.stdout.write(`memory, all in memory: ${JSON.stringify({ ...memory, growth: undefined })}\n`);
  return { topic, produceMs, cached, memory };
}

// 4. Kafka Streams --------------------------------------------------------------------------------

interface StreamsRun {
  ok: boolean;
  error?: string;
  rss_anon_mb?: number;
  vm_rss_mb?: number;
  rss_anon_mb_peak?: number;
  vm_rss_mb_peak?: number;
  steady_records_per_s?: number;
  e2e_s?: number;
  heap: string;
}

async function streamsSection(ctx: Ctx, topic: string): Promise<StreamsRun> {
  const heap = '1g';
  const samples: Array<NonNullable<ReturnType<typeof readMemory>>> = [];
  let timer: NodeJS.Timeout | undefined;
  let settled: ReturnType<typeof readMemory>;
  try {
    const result = await runKafkaStreams({
      topic,
      brokers: ctx.brokers,
      heap,
      timeoutMs: 3_600_000,
      onChild: (child) => {
        timer = setInterval(() => {
          const m = readMemory(child.pid);
          if (m) samples.push(m);
        }, 500);
      },
      beforeStop: async (child) => {
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        settled = readMemory(child.pid);
      },
    });
    return {
      ok: true,
      heap,
      rss_anon_mb: settled ? Math.round(settled.rssAnon) : undefined,
      vm_rss_mb: settled ? Math.round(settled.vmRss) : undefined,
      rss_anon_mb_peak: Math.round(Math.max(0, ...samples.map((s) => s.rssAnon))),
      vm_rss_mb_peak: Math.round(Math.max(0, ...samples.map((s) => s.vmRss))),
      steady_records_per_s: result.steady ? Math.round((result.steady.records * 1000) / result.steady.ms) : undefined,
      e2e_s: round(result.ms / 1000, 1),
    };
  } catch (err) {
    return { ok: false, heap, error: (err as Error).message.split('\n').slice(0, 5).join(' | ') };
  } finally {
    clearInterval(timer);
  }
}

// Main ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = performance.now();
  const commit = productCommit();
  const run = uniqueName('bench-state');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bench-state-'));
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bench-state-logs-'));
  const ctx: Ctx = { run, root, logDir, brokers: brokersFromEnv(), flows: [] };
  process.stdout.write(`bench:state ${isQuick() ? '(quick) ' : ''}run ${run}; worker logs in ${logDir}\n`);
  // Interrupted (Ctrl-C, SIGTERM): the workers stopped and the run's topics, groups, workflows and state removed all the same.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`${signal}: stopping the workers and removing the run's topics, groups, workflows and state\n`);
      for (const w of workersStarted) w.kill();
      void cleanup(ctx).finally(() => process.exit(130));
    });
  }
  const loadAtStart = os.loadavg().map((l) => round(l, 2));
  const durations: Record<string, number> = {};
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    try {
      return await fn();
    } finally {
      durations[name] = round((performance.now() - t) / 1000, 1);
    }
  };
  try {
    const fold = PARTS.has('fold') || PARTS.has('restart') ? await timed('fold_s', () => foldSection(ctx)) : undefined;
    const restart = fold && PARTS.has('restart') ? await timed('restart_s', () => restartSection(ctx, fold)) : undefined;
    const memory = PARTS.has('memory') ? await timed('memory_s', () => memorySection(ctx)) : undefined;
    const streams = memory && PARTS.has('streams') ? await timed('streams_s', () => streamsSection(ctx, memory.topic)) : undefined;

    const figures: Record<string, number> = {};
    const goals: Record<string, string> = {};
    const rows: Row[] = [];
    if (memory) {
      const c = memory.cached;
      if (c.rss_anon_mb !== undefined) figures.rss_mb_10m_keys = c.rss_anon_mb;
      if (c.vm_rss_mb !== undefined) figures.rss_total_mb_10m_keys = c.vm_rss_mb;
      figures.rss_peak_mb_10m_keys = c.rss_anon_mb_peak;
      if (memory.memory?.rss_anon_mb !== undefined) figures.rss_mb_10m_keys_in_memory = memory.memory.rss_anon_mb;
      if (memory.memory && memory.memory.outcome !== 'caught up') figures.in_memory_keys_reached_10m = memory.memory.folded;
      if (streams?.ok && streams.rss_anon_mb !== undefined) figures.rss_mb_10m_keys_kafka_streams = streams.rss_anon_mb;
      goals.rss_mb_10m_keys = '<= 1,024';
    }
    if (fold && PARTS.has('fold')) {
      const rate = (c: Contestant, phase: string, n: number) => fold.runs.find((r) => r.contestant === `fold-${c}` && r.phase === phase && r.round === n)!.records_per_s;
      const rounds = Array.from({ length: FOLD_ROUNDS }, (_, i) => i + 1);
      for (const phase of ['uniform', 'zipf']) {
        // Each round's ratio (its contestants folded one after another), then the median.
        const ratio = (of: Contestant) => round(median(rounds.map((r) => rate('cached', phase, r) / rate(of, phase, r))), 3);
        figures[`fold_vs_in_memory_${phase}`] = ratio('local');
        figures[`fold_vs_in_memory_no_local_state_${phase}`] = ratio('memory');
        for (const c of ['cached', 'local', 'memory'] as const) figures[`fold_records_per_s_${c}_${phase}`] = Math.round(median(rounds.map((r) => rate(c, phase, r))));
      }
      goals.fold_vs_in_memory_uniform = '>= 0.5';
      goals.fold_vs_in_memory_zipf = '>= 0.85';
    }
    if (restart) {
      type Timed = 'assigned_to_first_fold_ms' | 'assigned_to_all_restored_ms' | 'assigned_to_first_running_ms' | 'assigned_to_all_running_ms' | 'restore_ms_max' | 'spawn_to_first_fold_ms';
      const med = (flow: string, kind: RestartRun['kind'], field: Timed) => median(restart.runs.filter((r) => r.flow === flow && r.kind === kind).map((r) => r[field] ?? Number.NaN));
      const timed: Array<[string, string, RestartRun['kind'], Timed]> = [
        ['first_fold_ms_1m_keys', 'fold-cached', 'checkpoint', 'assigned_to_first_fold_ms'],
        ['first_fold_ms_10k_keys', 'small-cached', 'checkpoint', 'assigned_to_first_fold_ms'],
        ['first_fold_ms_1m_keys_from_spawn', 'fold-cached', 'checkpoint', 'spawn_to_first_fold_ms'],
        ['first_fold_ms_1m_keys_full_restore', 'fold-cached', 'full', 'assigned_to_first_fold_ms'],
        ['first_fold_ms_1m_keys_fresh_workflows', 'fold-cached', 'fresh-workflows', 'assigned_to_first_fold_ms'],
        ['first_fold_ms_10k_keys_fresh_workflows', 'small-cached', 'fresh-workflows', 'assigned_to_first_fold_ms'],
        ['all_restored_ms_1m_keys_checkpoint', 'fold-cached', 'checkpoint', 'assigned_to_all_restored_ms'],
        ['all_restored_ms_10k_keys_checkpoint', 'small-cached', 'checkpoint', 'assigned_to_all_restored_ms'],
        ['all_restored_ms_1m_keys_full', 'fold-cached', 'full', 'assigned_to_all_restored_ms'],
        ['all_running_ms_1m_keys_checkpoint', 'fold-cached', 'checkpoint', 'assigned_to_all_running_ms'],
        ['all_running_ms_1m_keys_full', 'fold-cached', 'full', 'assigned_to_all_running_ms'],
        ['restore_log_ms_max_1m_checkpoint', 'fold-cached', 'checkpoint', 'restore_ms_max'],
        ['restore_log_ms_max_1m_full', 'fold-cached', 'full', 'restore_ms_max'],
      ];
      for (const [figure, flow, kind, field] of timed) figures[figure] = med(flow, kind, field);
      figures.first_fold_1m_vs_10k = round(figures.first_fold_ms_1m_keys! / figures.first_fold_ms_10k_keys!, 2);
      figures.first_fold_1m_vs_10k_fresh_workflows = round(figures.first_fold_ms_1m_keys_fresh_workflows! / figures.first_fold_ms_10k_keys_fresh_workflows!, 2);
      figures.restore_full_vs_checkpoint_1m = round(figures.all_restored_ms_1m_keys_full! / figures.all_restored_ms_1m_keys_checkpoint!, 2);
      figures.restore_log_full_vs_checkpoint_1m = round(figures.restore_log_ms_max_1m_full! / Math.max(1, figures.restore_log_ms_max_1m_checkpoint!), 2);
      goals.first_fold_ms_1m_keys = '<= 1,000';
      goals.first_fold_1m_vs_10k = '<= 2';
      goals.restore_full_vs_checkpoint_1m = '>= 20';
    }
    for (const [figure, value] of Object.entries(figures)) {
      if (!Number.isFinite(value)) delete figures[figure];
      else rows.push({ figure, value, goal: goals[figure] ?? '' });
    }

    if (fold) printTable(`Fold rate: ${FOLD_KEYS.toLocaleString('en-US')} keys, bound ${FOLD_BOUND.toLocaleString('en-US')}, ${FOLD_RECORDS.toLocaleString('en-US')} records a phase, ${PARTITIONS} partitions`, fold.runs.map((r) => ({ ...r }) as unknown as Row));
    if (restart) printTable('Restarts', restart.runs.map((r) => ({ ...r }) as unknown as Row));
    if (memory) {
      const m = [memory.cached, memory.memory].filter((x): x is MemoryRun => x !== undefined);
      printTable(
        `Memory: ${MEM_KEYS.toLocaleString('en-US')} keys, ${PARTITIONS} partitions`,
        m.map((x) => ({ contestant: x.contestant, outcome: x.outcome, folded: x.folded, rss_anon_mb: x.rss_anon_mb ?? '', vm_rss_mb: x.vm_rss_mb ?? '', rss_anon_mb_peak: x.rss_anon_mb_peak, vm_rss_mb_peak: x.vm_rss_mb_peak, heap_used_mb: x.heap?.used ?? '', live_keys: x.live_keys ?? '', state_dir_mb: x.state_dir_mb ?? '' })),
      );
      if (streams) process.stdout.write(`Kafka Streams on the same input: ${JSON.stringify(streams)}\n\n`);
    }
    printTable('bench:state', rows);

    const kept = keptFigures(figures);
    const file = writeResults('state', { ...kept.figures, ...figures }, {
      productCommit: commit,
      versions: { kafka: '4.3.1', lmdb: JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', 'lmdb', 'package.json'), 'utf8')).version, 'kafka-streams': STREAMS_VERSION },
      notes: {
        quick: isQuick(),
        parts: [...PARTS],
        // The workers' V8 heap limit: node's default on this machine (the driver's, same node and flags unless BENCH_WORKER_NODE_ARGS).
        heap_limit_mb: Math.round(v8.getHeapStatistics().heap_size_limit / (1024 * 1024)),
        worker_node_args: process.env.BENCH_WORKER_NODE_ARGS ?? '',
        partitions: PARTITIONS,
        flow: 'bench/flows/totals.ts: {count, total} per key, transactional Kafka persistence, persistEvery = fireEvery 1 s, one worker process',
        goals,
        measured: {
          rss_mb_10m_keys: `RssAnon (/proc/<pid>/status) of the one worker, MiB, ${SETTLE_MS / 1000} s after the group's committed offsets reached the end of a topic of ${MEM_KEYS} records, every key once (KFT_STATE_CACHE_MAX_KEYS=${MEM_BOUND}, KFT_STATE_DIR); rss_total_mb_10m_keys: VmRSS then (RssFile: LMDB's mapped pages and the code); rss_peak_mb_10m_keys: the highest RssAnon sampled (every 500 ms) during the run`,
          rss_mb_10m_keys_in_memory: 'the same input, no bound and local state OFF (the default: every key and its latest snapshot record in the heap), same measure; if it could not hold every key, in_memory_keys_reached_10m is how far it got and notes.memory.memory what happened',
          rss_mb_10m_keys_kafka_streams: `Kafka Streams ${STREAMS_VERSION} TotalsApp (RocksDB store, exactly_once_v2, -Xmx1g) on the same topic, RssAnon likewise`,
          fold_vs_in_memory: `median over ${FOLD_ROUNDS} rounds of: fold rate (records of the phase ÷ its first record produced → the committed offsets at the end, the worker idle with every partition running before) of the cached worker (bound ${FOLD_BOUND}, ${FOLD_KEYS} keys in its store) ÷ the same with local state and no bound (every key in memory), same phase, same run; _no_local_state: ÷ the worker without local state (its keys restored from the snapshot topic before the window)`,
          first_fold_ms: `restart onto the intact store (after a SIGTERM stop; ${RESTART_RECORDS} records produced meanwhile): the worker's 'partitions assigned' log line → its first record folded (BENCH FIRST_FOLD), median of ${RESTART_RUNS}; _from_spawn: from the process's spawn; _fresh_workflows: the partition workflows terminated before the restart (nothing to replay)`,
          restore_full_vs_checkpoint_1m: `'partitions assigned' → the last of the ${PARTITIONS} 'partition recovered' lines (each partition's restore done: fence, store checks, the snapshot records after the checkpoint — or, with the state directory deleted, the whole snapshot partition), full ÷ checkpoint, median of ${RESTART_RUNS} each; all_running_*: → the last 'recovered' line (the partition workflow's recover activity done, the partition folding); restore_log_*: the largest per-partition 'restored … K ms'`,
        },
        sizes: { mem_keys: MEM_KEYS, mem_bound: MEM_BOUND, fold_keys: FOLD_KEYS, fold_bound: FOLD_BOUND, fold_records_per_phase: FOLD_RECORDS, fold_rounds: FOLD_ROUNDS, small_keys: SMALL_KEYS, restart_runs: RESTART_RUNS, restart_records: RESTART_RECORDS, zipf_s: ZIPF_S },
        fold: fold && {
          runs: fold.runs,
          persisted_check: fold.checks,
          starts: fold.starts,
          stops: fold.stops,
          zipf_head_share_of_bound: round(fold.zipfHeadShare, 3),
        },
        restart: restart && { runs: restart.runs, persisted_check: restart.checks },
        memory: memory && { produce_ms: memory.produceMs, cached: memory.cached, memory: memory.memory },
        streams,
        worker_warnings: Object.fromEntries([...problems].sort((a, b) => b[1].level - a[1].level || b[1].count - a[1].count)),
        durations_s: { ...durations, total: round((performance.now() - started) / 1000, 1) },
        ...(kept.note ? { kept: kept.note } : {}),
        load_average: { start: loadAtStart, end: os.loadavg().map((l) => round(l, 2)) },
      },
    });
    process.stdout.write(`results: ${file} (${round((performance.now() - started) / 1000)} s)\n`);
  } finally {
    await cleanup(ctx);
  }
}

const ALL_PARTS = ['fold', 'restart', 'memory', 'streams'];

/**
 * A run of some parts only keeps the other parts' figures from the results file when it is of the
 * same size: which parts, and the commit and time they were measured at (notes.kept).
 */
function keptFigures(measured: Record<string, number>): { figures: Record<string, number>; note?: Record<string, unknown> } {
  const notRun = ALL_PARTS.filter((p) => !PARTS.has(p));
  if (notRun.length === 0) return { figures: {} };
  let previous: { figures?: Record<string, number>; quick?: boolean; product_commit?: string; at?: string; notes?: Record<string, unknown> };
  try {
    previous = JSON.parse(fs.readFileSync(path.join(resultsDir(), 'state.json'), 'utf8'));
  } catch {
    return { figures: {} };
  }
  if (!previous.figures || previous.quick !== isQuick()) return { figures: {} };
  const figures = Object.fromEntries(Object.entries(previous.figures).filter(([name]) => !(name in measured)));
  const earlier = previous.notes?.kept as { parts?: Record<string, unknown> } | undefined;
  const parts: Record<string, unknown> = {};
  for (const p of notRun) parts[p] = earlier?.parts?.[p] ?? { product_commit: previous.product_commit, at: previous.at };
  return { figures, note: { figures: Object.keys(figures), parts } };
}

async function cleanup(ctx: Ctx): Promise<void> {
  for (const f of ctx.flows) await terminateFlowWorkflows(f.name, f.topic, PARTITIONS);
  await deleteRunTopicsAndGroup(ctx.run, ctx.flows[0]?.name ?? ctx.run, ctx.brokers);
  await deleteGroups(ctx.flows.map((f) => f.name), ctx.brokers);
  fs.rmSync(ctx.root, { recursive: true, force: true });
  if (process.env.BENCH_STATE_KEEP_LOGS !== '1') fs.rmSync(ctx.logDir, { recursive: true, force: true });
}

runMain(main);
