// Failover (issue 8, item 4): two workers of the offset-hash flow (test/fixtures/offset-hash-flow.ts:
// per key a count and a running hash over the offsets folded, so a lost or a twice-applied record
// shows) under steady load from a producer; kill -9 one of them, and measure
//   failover_ms   kill → every partition `running` on the survivor (the partition workflows'
//                 status) and the group's committed offset of every partition past where it was
//                 at the kill (so the survivor is folding and persisting them);
//   records_lost / records_duplicated / keys_mismatched
//                 after the load stops and the survivor has caught up and stopped (flushing), the
//                 persisted state (inspect) against a plain fold of the input topic: per key, count
//                 short of the reference = lost, count beyond it = duplicated, a hash that differs =
//                 mismatched. All must be 0.
// The flow's consumer session timeout is set short (the broker's minimum, 6 s): the coordinator
// notices the dead member only when it expires, so failover_ms is dominated by it;
// failover_minus_session_timeout_ms is the rest (rebalance, the partition workflows moving the
// partitions, recovery, the first persist). Each trial has its own topic, group and workflows.
// Each trial runs twice: as above, and with standby replicas (issue 30: each worker with its own
// KFT_STATE_DIR and KFT_STANDBY_REPLICAS=1, so the survivor keeps a warm copy of the partitions the
// dead worker owned):
//   failover_ms_standby        the same measure with standbys
//   failover_restored_records_with_standby / _without_standby
//                              snapshot records the survivor's recoveries of the dead worker's
//                              partitions read from the topic (its `recovered` lines' snapshotsRead)
//   snapshot_records_last_second_before_kill
//                              offsets the snapshot partitions of those partitions grew by in the last
//                              second before the kill: a standby copy a round (1 s) behind reads about
//                              this much, the bound the issue sets on the restored records
// Each trial also runs Kafka Streams' standby failover side by side (issue 30: "against Kafka
// Streams' standby failover in the same run"): two instances of bench/anchors/kafka-streams
// RebalanceApp (the same offset-hash topology in a changelogged store, exactly-once v2, commit 1 s,
// session timeout 6 s, heartbeat 1 s), each with its own state dir and num.standby.replicas=1, on
// their own topic at the same rate and partitions. Once both are RUNNING and fold, the same
// BEFORE_KILL_MS of load (the standbys tail the changelog meanwhile), then kill -9 of one:
//   failover_ms_streams_standby   kill → every partition folding again (a fold-probe line after
//                                 the kill: the survivor processes it; Kafka Streams' analogue of
//                                 `running`) and the application's committed offset of every
//                                 partition past its value at the kill — the same criterion
//   parts: reassigned (the survivor's state REBALANCING), running (its state RUNNING again),
//   first / last folding (the first and the last of the dead instance's partitions with a probe
//   line on the survivor), committed. Exactness from the store's changelog (read committed)
//   against a plain fold of the input, as bench:rebalance does.
// Ours runs the fold-probe variant of the flow (bench/flows/offset-hash-probe.ts), so the same
// first / last folding parts show for ours too (they are not part of ours' failover_ms).
// `npm run bench:failover [-- --quick]`: full 3 trials at 2,000 records/s; quick 1 at 500/s.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Partitioners } from 'kafkajs';
import { sized } from './lib/args';
import { ensureStreamsJar, STREAMS_VERSION } from './lib/anchors';
import {
  caughtUp,
  committed,
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
  type tallyOffsetHash,
} from './lib/flow-workers';
import { startProgress } from './lib/progress';
import { endOffsets } from './lib/committed';
import { benchKafka, uniqueName } from './lib/records';
import { PACKAGE_ROOT, writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median } from './lib/timing';
import { compareStreamsOffsetHash, readFoldLog, spawnStreamsApp, streamsState } from './lib/streams-app';
import { brokersFromEnv } from '../config/env';
import { defaultSnapshotTopic } from '../persistence/kafka/topic';

/** test/fixtures/offset-hash-flow.ts with a fold probe (BENCH_FOLD_LOG), as bench:rebalance runs it. */
const FLOW_MODULE = path.join(PACKAGE_ROOT, 'bench', 'flows', 'offset-hash-probe.ts');
const PARTITIONS = 6;
const KEYS = 1_000;
const RATE = sized(2_000, 500);
const TRIALS = Number(process.env.BENCH_RUNS ?? sized(3, 1));
/** The broker's group.min.session.timeout.ms: the shortest a member may ask for. */
const SESSION_TIMEOUT_MS = Number(process.env.BENCH_SESSION_TIMEOUT_MS ?? 6_000);
const PERSIST_EVERY_MS = 1_000;
/** Load before the kill, once both workers run their partitions; and after the failover. */
const BEFORE_KILL_MS = sized(8_000, 5_000);
const AFTER_FAILOVER_MS = sized(5_000, 3_000);
const FAILOVER_DEADLINE_MS = 120_000;
const VARIANTS = ['plain', 'standby', 'streams-standby'] as const;
/** BENCH_FAILOVER_VARIANTS=standby,…: only these trials, printed and not written to the results (an experiment's loop). */
const ONLY = process.env.BENCH_FAILOVER_VARIANTS?.split(',').map((v) => v.trim());

interface Trial extends TrialEnd {
  failover_ms: number;
  /** kill → the survivor's consumer is assigned the dead worker's partitions (its log). */
  reassigned_ms?: number;
  /** kill → the survivor logged the last of those partitions recovered. */
  recovered_ms?: number;
  /** kill → every partition running on the survivor (workflow status). */
  running_ms?: number;
  /** kill → the committed offset of every partition past its value at the kill. */
  committed_ms?: number;
  /** kill → the first / the last of the dead worker's partitions folding on the survivor (fold probe). */
  first_folding_ms?: number;
  last_folding_ms?: number;
  killed_partitions: number[];
  /** Snapshot records the survivor's recoveries of the killed partitions read from the topic. */
  restored_records?: number;
  /** Offsets the killed partitions' snapshot partitions grew by in the last second before the kill. */
  written_last_second: number;
  /** Produced (records_in_topic: found in the input topic by the reference fold). */
  records: number;
}

type Variant = 'plain' | 'standby';

/** How a trial ended: the exactness tally against a plain fold of the input, the survivor's exit, the load. */
type TrialEnd = ReturnType<typeof tallyOffsetHash> & { survivor_exit: number | null; load_avg_1m: number };

/** Kafka Streams' standby failover (RebalanceApp, num.standby.replicas=1). */
interface StreamsTrial extends TrialEnd {
  failover_ms: number;
  /** kill → the survivor's state REBALANCING (its own epoch stamp). */
  reassigned_ms?: number;
  /** kill → the survivor's state RUNNING again. */
  running_ms?: number;
  /** kill → the first / the last of the dead instance's partitions folding on the survivor (fold probe). */
  first_folding_ms: number;
  last_folding_ms: number;
  /** kill → every partition folding again (a probe line after the kill). */
  folding_ms: number;
  committed_ms: number;
  killed_partitions: number[];
  /** Task directories (active and standby) in the survivor's state dir at the kill: PARTITIONS when it held a standby of each of the dead instance's tasks. */
  survivor_task_dirs_at_kill: number;
  records: number;
}

/** The changelog of RebalanceApp's store ("offsethash") for application.id `id`. */
const changelogOf = (id: string) => `${id}-offsethash-changelog`;

/** Per partition of `partitions`, the first fold-probe line after `since` (epoch ms) in any of `logs`, or undefined. */
function firstFoldsAfter(logs: string[], since: number, partitions: number[]): Map<number, number | undefined> {
  const first = new Map<number, number | undefined>(partitions.map((p) => [p, undefined]));
  for (const log of logs) {
    for (const pr of readFoldLog(log)) {
      if (pr.t <= since || !first.has(pr.partition)) continue;
      const seen = first.get(pr.partition);
      if (seen === undefined || pr.t < seen) first.set(pr.partition, pr.t);
    }
  }
  return first;
}

/** The partitions whose latest fold-probe line (by time) before `before` is in `log` among `logs`. */
function lastFoldedIn(log: string, logs: string[], before: number): number[] {
  const latest = new Map<number, { t: number; log: string }>();
  for (const l of logs) {
    for (const pr of readFoldLog(l)) {
      if (pr.t > before) continue;
      const seen = latest.get(pr.partition);
      if (seen === undefined || pr.t > seen.t) latest.set(pr.partition, { t: pr.t, log: l });
    }
  }
  return [...latest].filter(([, v]) => v.log === log).map(([p]) => p).sort((x, y) => x - y);
}

async function main(): Promise<void> {
  const trials: Trial[] = [];
  const standbyTrials: Trial[] = [];
  const streamsTrials: StreamsTrial[] = [];
  ensureStreamsJar();
  for (let t = 1; t <= TRIALS; t++) {
    for (const variant of VARIANTS.filter((v) => !ONLY || ONLY.includes(v))) {
      process.stdout.write(`trial ${t}/${TRIALS} (${variant}): ${RATE} records/s over ${PARTITIONS} partitions, session timeout ${SESSION_TIMEOUT_MS} ms\n`);
      if (variant === 'streams-standby') {
        const trial = await runStreamsTrial();
        streamsTrials.push(trial);
        process.stdout.write(`  ${JSON.stringify(trial)}\n`);
        continue;
      }
      const trial = await runTrial(variant);
      (variant === 'plain' ? trials : standbyTrials).push(trial);
      process.stdout.write(`  ${JSON.stringify(trial)}\n`);
    }
  }
  if (ONLY) {
    process.stdout.write(`BENCH_FAILOVER_VARIANTS=${ONLY.join(',')}: a partial run, not written to the results\n`);
    return;
  }
  const failover = median(trials.map((t) => t.failover_ms));
  const sum = (k: 'records_lost' | 'records_duplicated' | 'keys_mismatched') => [...trials, ...standbyTrials].reduce((a, t) => a + t[k], 0);
  const restored = (ts: Trial[]) => Math.round(median(ts.map((t) => t.restored_records ?? Number.NaN)));
  const medOf = <T>(ts: T[], k: keyof T) => {
    const values = ts.flatMap((t) => (typeof t[k] === 'number' ? [t[k] as number] : []));
    return values.length === ts.length && values.length > 0 ? Math.round(median(values)) : undefined;
  };
  const med = (k: 'reassigned_ms' | 'recovered_ms' | 'running_ms' | 'committed_ms') => medOf(trials, k);
  const streamsSum = (k: 'records_lost' | 'records_duplicated' | 'keys_mismatched') => streamsTrials.reduce((a, t) => a + t[k], 0);
  const exactness = { records_lost: sum('records_lost'), records_duplicated: sum('records_duplicated'), keys_mismatched: sum('keys_mismatched') };
  const figures: Record<string, number> = {
    failover_ms: Math.round(failover),
    failover_minus_session_timeout_ms: Math.round(failover - SESSION_TIMEOUT_MS),
    session_timeout_ms: SESSION_TIMEOUT_MS,
    ...exactness,
    failover_ms_standby: Math.round(median(standbyTrials.map((t) => t.failover_ms))),
    failover_restored_records_without_standby: restored(trials),
    failover_restored_records_with_standby: restored(standbyTrials),
    snapshot_records_last_second_before_kill: Math.round(median(standbyTrials.map((t) => t.written_last_second))),
  };
  const phases = { reassigned_ms: med('reassigned_ms'), recovered_ms: med('recovered_ms'), running_ms: med('running_ms'), committed_ms: med('committed_ms') };
  for (const [k, v] of Object.entries(phases)) if (v !== undefined) figures[`failover_${k}`] = v;
  for (const [k, v] of Object.entries({
    first_folding_ms: medOf(trials, 'first_folding_ms'),
    last_folding_ms: medOf(trials, 'last_folding_ms'),
    standby_reassigned_ms: medOf(standbyTrials, 'reassigned_ms'),
    standby_recovered_ms: medOf(standbyTrials, 'recovered_ms'),
    standby_running_ms: medOf(standbyTrials, 'running_ms'),
    standby_committed_ms: medOf(standbyTrials, 'committed_ms'),
    standby_first_folding_ms: medOf(standbyTrials, 'first_folding_ms'),
    standby_last_folding_ms: medOf(standbyTrials, 'last_folding_ms'),
  }))
    if (v !== undefined) figures[`failover_${k}`] = v;
  const streamsFigures: Record<string, number | undefined> = {
    failover_ms_streams_standby: medOf(streamsTrials, 'failover_ms'),
    failover_streams_standby_reassigned_ms: medOf(streamsTrials, 'reassigned_ms'),
    failover_streams_standby_running_ms: medOf(streamsTrials, 'running_ms'),
    failover_streams_standby_first_folding_ms: medOf(streamsTrials, 'first_folding_ms'),
    failover_streams_standby_last_folding_ms: medOf(streamsTrials, 'last_folding_ms'),
    failover_streams_standby_committed_ms: medOf(streamsTrials, 'committed_ms'),
    streams_records_lost: streamsSum('records_lost'),
    streams_records_duplicated: streamsSum('records_duplicated'),
    streams_keys_mismatched: streamsSum('keys_mismatched'),
  };
  for (const [k, v] of Object.entries(streamsFigures)) if (v !== undefined) figures[k] = v;
  const rows: Row[] = [...trials.map((t, i) => ({ t, i, variant: 'plain' })), ...standbyTrials.map((t, i) => ({ t, i, variant: 'standby' }))].map(({ t, i, variant }) => ({
    trial: i + 1,
    variant,
    restored_records: t.restored_records ?? '-',
    failover_ms: Math.round(t.failover_ms),
    reassigned_ms: t.reassigned_ms ?? '-',
    recovered_ms: t.recovered_ms ?? '-',
    running_ms: t.running_ms ?? '-',
    first_folding_ms: t.first_folding_ms ?? '-',
    last_folding_ms: t.last_folding_ms ?? '-',
    committed_ms: t.committed_ms ?? '-',
    records: t.records,
    lost: t.records_lost,
    duplicated: t.records_duplicated,
    mismatched_keys: t.keys_mismatched,
  }));
  for (const [i, t] of streamsTrials.entries()) {
    rows.push({
      trial: i + 1,
      variant: 'streams-standby',
      restored_records: '-',
      failover_ms: t.failover_ms,
      reassigned_ms: t.reassigned_ms ?? '-',
      recovered_ms: '-',
      running_ms: t.running_ms ?? '-',
      first_folding_ms: t.first_folding_ms,
      last_folding_ms: t.last_folding_ms,
      committed_ms: t.committed_ms,
      records: t.records,
      lost: t.records_lost,
      duplicated: t.records_duplicated,
      mismatched_keys: t.keys_mismatched,
    });
  }
  printTable(`failover: kill -9 of one of two workers, ${RATE} records/s, session timeout ${SESSION_TIMEOUT_MS} ms (median of ${TRIALS})`, rows);
  process.stdout.write(
    `failover_ms = ${figures.failover_ms} (session timeout ${SESSION_TIMEOUT_MS} ms; the rest ${figures.failover_minus_session_timeout_ms} ms); ` +
      `lost ${figures.records_lost}, duplicated ${figures.records_duplicated}, mismatched keys ${figures.keys_mismatched} (all must be 0)\n` +
      `failover_ms_standby = ${figures.failover_ms_standby}; Kafka Streams with a standby replica: failover_ms_streams_standby = ${figures.failover_ms_streams_standby ?? '-'} ` +
      `(lost ${figures.streams_records_lost}, duplicated ${figures.streams_records_duplicated}, mismatched keys ${figures.streams_keys_mismatched})\n`,
  );
  const file = writeResults('failover', figures, {
    versions: { kafka: '4.3.1', 'kafka-streams': STREAMS_VERSION },
    notes: {
      flow: 'test/fixtures/offset-hash-flow.ts (per key: count and a running hash over the folded offsets), transactional Kafka persistence',
      partitions: PARTITIONS,
      keys: KEYS,
      rate_records_per_s: RATE,
      persist_every_ms: PERSIST_EVERY_MS,
      session_timeout_ms: SESSION_TIMEOUT_MS,
      heartbeat_interval_ms: 1_000,
      load_before_kill_ms: BEFORE_KILL_MS,
      load_after_failover_ms: AFTER_FAILOVER_MS,
      trials: TRIALS,
      statistic: 'median of the trials; lost/duplicated/mismatched summed over them',
      phases: 'ms after the kill: reassigned (survivor logs the new assignment), recovered (last of the dead worker\'s partitions recovered on the survivor), running (all partitions running on the survivor per the workflows), committed (every partition\'s committed offset past its value at the kill); failover_ms is when both of the last two hold',
      runs: trials,
      standby:
        'the same trials with KFT_STATE_DIR per worker and KFT_STANDBY_REPLICAS=1 (a round a second); restored records: the survivor\'s `recovered` lines\' snapshotsRead for the dead worker\'s partitions; last second: the growth of those snapshot partitions\' end offsets in the second before the kill',
      standby_runs: standbyTrials,
      folding:
        'first/last folding: ms after the kill of the first fold-probe line (bench/flows/offset-hash-probe.ts; RebalanceApp\'s own probe) on the survivor of the first and the last of the dead member\'s partitions; recorded, not part of ours\' failover_ms',
      streams_standby:
        'Kafka Streams (bench/anchors/kafka-streams RebalanceApp, the same offset-hash topology in a changelogged store): two instances, own state dirs, num.standby.replicas=1, exactly-once v2, commit 1 s, session timeout 6 s, heartbeat 1 s, acceptable.recovery.lag max, transaction.timeout.ms its EOS default (10 s); its own topic, same rate and partitions, each trial after ours. Killed -9 after both RUNNING and folding plus the same load_before_kill_ms. failover_ms_streams_standby: kill → every partition with a fold-probe line after the kill and the application\'s committed offset of every partition past its value at the kill (polled every ≈ 100 ms); parts: reassigned (survivor state REBALANCING), running (RUNNING again), first/last folding (the dead instance\'s partitions), committed. streams_records_*: the store changelog read committed against a plain fold of the input, after the load stopped, the survivor caught up and was stopped; summed over the trials',
      streams_standby_runs: streamsTrials,
    },
  });
  process.stdout.write(`results: ${file}\n`);
  if (exactness.records_lost + exactness.records_duplicated + exactness.keys_mismatched > 0) process.exitCode = 1;
  if (streamsSum('records_lost') + streamsSum('records_duplicated') + streamsSum('keys_mismatched') > 0) process.exitCode = 1;
}

async function runTrial(variant: Variant): Promise<Trial> {
  const brokers = brokersFromEnv();
  const id = uniqueName('bench-failover');
  const names = { name: id, group: id, topic: id, backend: 'kafka' as const, persistEveryMs: PERSIST_EVERY_MS, sessionTimeoutMs: SESSION_TIMEOUT_MS };
  const kafka = benchKafka('bench-failover', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const workers: FlowWorker[] = [];
  let watcher: StatusWatcher | undefined;
  let input: SteadyLoad | undefined;
  const load = os.loadavg()[0] ?? 0;
  let stateRoot: string | undefined;
  let probeDir: string | undefined;
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();
    input = new SteadyLoad(producer, id, RATE, KEYS);
    const env = offsetHashEnv(id, PERSIST_EVERY_MS, SESSION_TIMEOUT_MS);
    const logFile = process.env.BENCH_WORKER_LOG;
    stateRoot = variant === 'standby' ? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-failover-')) : undefined;
    probeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-failover-probes-'));
    const foldLogs = { a: path.join(probeDir, 'a.folds'), b: path.join(probeDir, 'b.folds') };
    const own = (name: 'a' | 'b') => ({
      ...env,
      BENCH_FOLD_LOG: foldLogs[name],
      ...(stateRoot ? { KFT_STATE_DIR: path.join(stateRoot, name), KFT_STANDBY_REPLICAS: '1' } : {}),
    });
    const a = spawnWorker('a', FLOW_MODULE, own('a'), logFile);
    const b = spawnWorker('b', FLOW_MODULE, own('b'), logFile);
    workers.push(a, b);
    watcher = await StatusWatcher.connect();
    const w = watcher;
    const both = await eventually('both workers run partitions', () => w.runningOn(id, id, PARTITIONS, 2), 180_000, [a, b]);
    // The dead worker's partitions: those whose owner's task queue names its pid.
    const ownedBy = (worker: FlowWorker, rows: typeof both) =>
      rows.filter((r) => r.owner?.taskQueue.includes(`/${worker.process.pid}-`)).map((r) => r.partition);
    if (ownedBy(a, both).length === 0 || ownedBy(b, both).length === 0) throw new Error('both workers should own partitions');
    await sleep(BEFORE_KILL_MS - 1_000);
    const snapshotTopic = defaultSnapshotTopic(id, id);
    const secondBefore = await endOffsets(admin, snapshotTopic);
    await sleep(1_000);

    const atKill = await committed(admin, id);
    const killedPartitions = ownedBy(a, (await w.runningOn(id, id, PARTITIONS, 2)) ?? both);
    const killedEpoch = Date.now();
    a.kill();
    const killedAt = performance.now();
    const atKillEnd = await endOffsets(admin, snapshotTopic);
    const writtenLastSecond = killedPartitions.reduce((n, p) => n + Number((atKillEnd.get(p) ?? 0n) - (secondBefore.get(p) ?? 0n)), 0);
    const survivorQueue = `/${b.process.pid}-`;
    const progress = startProgress('failover', PARTITIONS, { plainEveryMs: 2_000 });
    let runningAt: number | undefined;
    let committedAt: number | undefined;
    let failoverAt: number | undefined;
    try {
      while (failoverAt === undefined) {
        if (performance.now() - killedAt > FAILOVER_DEADLINE_MS) throw new Error(`no failover within ${FAILOVER_DEADLINE_MS} ms`);
        if (b.process.exitCode !== null) throw new Error(`the survivor exited (${b.process.exitCode})`);
        const [rows, now] = await Promise.all([w.statuses(id, id, PARTITIONS), committed(admin, id)]);
        const at = performance.now();
        const running = rows.filter((r) => r?.phase === 'running' && r.owner?.taskQueue.includes(survivorQueue)).length;
        const advanced = [...atKill].filter(([p, offset]) => (now.get(p) ?? -1n) > offset).length;
        progress.update(Math.min(running, advanced));
        if (running === PARTITIONS) runningAt ??= at;
        if (advanced === PARTITIONS) committedAt ??= at;
        if (running === PARTITIONS && advanced === PARTITIONS) failoverAt = at;
        else await sleep(100);
      }
    } finally {
      progress.stop();
    }
    const after = (match: (msg: string | undefined, json: Record<string, unknown>) => boolean) =>
      b.lines.filter((l) => l.at >= killedAt && l.json && match(l.json.msg, l.json));
    const reassigned = after((msg) => msg === 'partitions assigned')[0];
    const recoveredLines = after((msg, json) => msg === 'recovered' && killedPartitions.includes(json.partition as number));
    const recoveredAt = recoveredLines.length >= killedPartitions.length ? recoveredLines[recoveredLines.length - 1]!.at : undefined;
    const folds = [...firstFoldsAfter([foldLogs.b], killedEpoch, killedPartitions).values()];
    const foldedAll = folds.every((t) => t !== undefined) && folds.length > 0;
    const restoredRecords = recoveredLines.length >= killedPartitions.length ? recoveredLines.reduce((n, l) => n + Number(l.json?.snapshotsRead ?? 0), 0) : undefined;

    await sleep(AFTER_FAILOVER_MS);
    await input.stop();
    await eventually('the survivor caught up', async () => caughtUp(admin, id), 120_000, [b]);
    const survivorExit = await b.stop();
    const exact = await compareOffsetHash(names, PARTITIONS, brokers);
    return {
      failover_ms: Math.round(failoverAt - killedAt),
      reassigned_ms: reassigned ? Math.round(reassigned.at - killedAt) : undefined,
      recovered_ms: recoveredAt === undefined ? undefined : Math.round(recoveredAt - killedAt),
      running_ms: runningAt === undefined ? undefined : Math.round(runningAt - killedAt),
      committed_ms: committedAt === undefined ? undefined : Math.round(committedAt - killedAt),
      first_folding_ms: foldedAll ? Math.min(...(folds as number[])) - killedEpoch : undefined,
      last_folding_ms: foldedAll ? Math.max(...(folds as number[])) - killedEpoch : undefined,
      killed_partitions: killedPartitions,
      restored_records: restoredRecords,
      written_last_second: writtenLastSecond,
      records: input.produced,
      ...exact,
      survivor_exit: survivorExit,
      load_avg_1m: Number(load.toFixed(2)),
    };
  } finally {
    await endFlowRun({ id, partitions: PARTITIONS, brokers, input, workers, watcher, producer, admin });
    if (stateRoot) fs.rmSync(stateRoot, { recursive: true, force: true });
    if (probeDir) fs.rmSync(probeDir, { recursive: true, force: true });
  }
}

/** Kafka Streams' standby failover: two RebalanceApp instances with num.standby.replicas=1, one killed -9. */
async function runStreamsTrial(): Promise<StreamsTrial> {
  const brokers = brokersFromEnv();
  const id = uniqueName('bench-failover-ks');
  const kafka = benchKafka('bench-failover', brokers);
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const workers: FlowWorker[] = [];
  let input: SteadyLoad | undefined;
  const load = os.loadavg()[0] ?? 0;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-failover-ks-'));
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();
    input = new SteadyLoad(producer, id, RATE, KEYS);
    const logFile = process.env.BENCH_WORKER_LOG;
    const foldLogs = { a: path.join(root, 'a.folds'), b: path.join(root, 'b.folds') };
    const start = (name: 'a' | 'b') => spawnStreamsApp(name, id, brokers, path.join(root, `${name}.state`), foldLogs[name], { standbys: 1, logFile });
    const a = start('a');
    const b = start('b');
    workers.push(a, b);
    const logs = [foldLogs.a, foldLogs.b];
    // Both RUNNING, each folding, every partition folded in the last 2 s.
    await eventually(
      'both Kafka Streams instances RUNNING and folding',
      async () => {
        if (streamsState(a) !== 'RUNNING' || streamsState(b) !== 'RUNNING') return false;
        const since = Date.now() - 2_000;
        const recent = (log: string) => readFoldLog(log).filter((pr) => pr.t >= since);
        const ra = recent(foldLogs.a);
        const rb = recent(foldLogs.b);
        return ra.length > 0 && rb.length > 0 && new Set([...ra, ...rb].map((pr) => pr.partition)).size === PARTITIONS;
      },
      180_000,
      [a, b],
    );
    await sleep(BEFORE_KILL_MS);

    const atKill = await committed(admin, id);
    const killedPartitions = lastFoldedIn(foldLogs.a, logs, Date.now());
    if (killedPartitions.length === 0 || killedPartitions.length === PARTITIONS) throw new Error(`both instances should own partitions (a: ${killedPartitions.join(',')})`);
    // The survivor's task directories (state.dir/<application.id>/<task>): its active tasks and its standbys.
    const taskDirs = (() => {
      try {
        return fs.readdirSync(path.join(root, 'b.state', id)).filter((d) => /^\d+_\d+$/.test(d)).length;
      } catch {
        return 0;
      }
    })();
    const killedEpoch = Date.now();
    a.kill();
    const all = Array.from({ length: PARTITIONS }, (_, p) => p);
    const progress = startProgress('failover (kafka streams)', PARTITIONS, { plainEveryMs: 2_000 });
    let committedAt: number | undefined;
    let foldingAt: number | undefined;
    let failoverAt: number | undefined;
    try {
      while (failoverAt === undefined) {
        if (Date.now() - killedEpoch > FAILOVER_DEADLINE_MS) throw new Error(`no Kafka Streams failover within ${FAILOVER_DEADLINE_MS} ms`);
        if (b.process.exitCode !== null) throw new Error(`the surviving instance exited (${b.process.exitCode})`);
        const now = await committed(admin, id);
        const folded = [...firstFoldsAfter([foldLogs.b], killedEpoch, all).values()].filter((t) => t !== undefined).length;
        const at = Date.now();
        const advanced = [...atKill].filter(([p, offset]) => (now.get(p) ?? -1n) > offset).length;
        progress.update(Math.min(folded, advanced));
        if (advanced === PARTITIONS && atKill.size === PARTITIONS) committedAt ??= at;
        if (folded === PARTITIONS) foldingAt ??= at;
        if (committedAt !== undefined && foldingAt !== undefined) failoverAt = at;
        else await sleep(100);
      }
    } finally {
      progress.stop();
    }
    const firstFolds = [...firstFoldsAfter([foldLogs.b], killedEpoch, killedPartitions).values()] as number[];
    const stateAfter = (state: string, after: number) =>
      b.lines.map((l) => l.line.split(' ')).find((w) => w[0] === 'STATE' && w[1] === state && Number(w[2]) >= after);
    const rebalancing = stateAfter('REBALANCING', killedEpoch);
    const running = rebalancing ? stateAfter('RUNNING', Number(rebalancing[2])) : undefined;

    await sleep(AFTER_FAILOVER_MS);
    await input.stop();
    await eventually('the surviving instance caught up', async () => caughtUp(admin, id), 120_000, [b]);
    const survivorExit = await b.stop();
    const exact = await compareStreamsOffsetHash(id, changelogOf(id), PARTITIONS, brokers);
    return {
      failover_ms: failoverAt - killedEpoch,
      reassigned_ms: rebalancing ? Number(rebalancing[2]) - killedEpoch : undefined,
      running_ms: running ? Number(running[2]) - killedEpoch : undefined,
      first_folding_ms: Math.min(...firstFolds) - killedEpoch,
      last_folding_ms: Math.max(...firstFolds) - killedEpoch,
      folding_ms: foldingAt! - killedEpoch,
      committed_ms: committedAt! - killedEpoch,
      killed_partitions: killedPartitions,
      survivor_task_dirs_at_kill: taskDirs,
      records: input.produced,
      ...exact,
      survivor_exit: survivorExit,
      load_avg_1m: Number(load.toFixed(2)),
    };
  } finally {
    await endFlowRun({ id, partitions: PARTITIONS, brokers, input, workers, producer, admin });
    fs.rmSync(root, { recursive: true, force: true });
  }
}

runMain(main);
