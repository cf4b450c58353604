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
// `npm run bench:failover [-- --quick]`: full 3 trials at 2,000 records/s; quick 1 at 500/s.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Partitioners } from 'kafkajs';
import { sized } from './lib/args';
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
} from './lib/flow-workers';
import { startProgress } from './lib/progress';
import { endOffsets } from './lib/committed';
import { benchKafka, uniqueName } from './lib/records';
import { PACKAGE_ROOT, writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median } from './lib/timing';
import { brokersFromEnv } from '../config/env';
import { defaultSnapshotTopic } from '../persistence/kafka/topic';

const FLOW_MODULE = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'offset-hash-flow.ts');
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

interface Trial {
  failover_ms: number;
  /** kill → the survivor's consumer is assigned the dead worker's partitions (its log). */
  reassigned_ms?: number;
  /** kill → the survivor logged the last of those partitions recovered. */
  recovered_ms?: number;
  /** kill → every partition running on the survivor (workflow status). */
  running_ms?: number;
  /** kill → the committed offset of every partition past its value at the kill. */
  committed_ms?: number;
  killed_partitions: number[];
  /** Snapshot records the survivor's recoveries of the killed partitions read from the topic. */
  restored_records?: number;
  /** Offsets the killed partitions' snapshot partitions grew by in the last second before the kill. */
  written_last_second: number;
  /** Produced, and found in the input topic by the reference fold. */
  records: number;
  records_in_topic: number;
  keys: number;
  records_lost: number;
  records_duplicated: number;
  keys_mismatched: number;
  survivor_exit: number | null;
  load_avg_1m: number;
}

type Variant = 'plain' | 'standby';

async function main(): Promise<void> {
  const trials: Trial[] = [];
  const standbyTrials: Trial[] = [];
  for (let t = 1; t <= TRIALS; t++) {
    for (const variant of ['plain', 'standby'] as const) {
      process.stdout.write(`trial ${t}/${TRIALS} (${variant}): ${RATE} records/s over ${PARTITIONS} partitions, session timeout ${SESSION_TIMEOUT_MS} ms\n`);
      const trial = await runTrial(variant);
      (variant === 'plain' ? trials : standbyTrials).push(trial);
      process.stdout.write(`  ${JSON.stringify(trial)}\n`);
    }
  }
  const failover = median(trials.map((t) => t.failover_ms));
  const sum = (k: 'records_lost' | 'records_duplicated' | 'keys_mismatched') => [...trials, ...standbyTrials].reduce((a, t) => a + t[k], 0);
  const restored = (ts: Trial[]) => Math.round(median(ts.map((t) => t.restored_records ?? Number.NaN)));
  const med = (k: 'reassigned_ms' | 'recovered_ms' | 'running_ms' | 'committed_ms') => {
    const values = trials.flatMap((t) => (t[k] === undefined ? [] : [t[k]!]));
    return values.length === trials.length ? Math.round(median(values)) : undefined;
  };
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
  const rows: Row[] = [...trials.map((t, i) => ({ t, i, variant: 'plain' })), ...standbyTrials.map((t, i) => ({ t, i, variant: 'standby' }))].map(({ t, i, variant }) => ({
    trial: i + 1,
    variant,
    restored_records: t.restored_records ?? '-',
    failover_ms: Math.round(t.failover_ms),
    reassigned_ms: t.reassigned_ms ?? '-',
    recovered_ms: t.recovered_ms ?? '-',
    running_ms: t.running_ms ?? '-',
    committed_ms: t.committed_ms ?? '-',
    records: t.records,
    lost: t.records_lost,
    duplicated: t.records_duplicated,
    mismatched_keys: t.keys_mismatched,
  }));
  printTable(`failover: kill -9 of one of two workers, ${RATE} records/s, session timeout ${SESSION_TIMEOUT_MS} ms (median of ${TRIALS})`, rows);
  process.stdout.write(
    `failover_ms = ${figures.failover_ms} (session timeout ${SESSION_TIMEOUT_MS} ms; the rest ${figures.failover_minus_session_timeout_ms} ms); ` +
      `lost ${figures.records_lost}, duplicated ${figures.records_duplicated}, mismatched keys ${figures.keys_mismatched} (all must be 0)\n`,
  );
  const file = writeResults('failover', figures, {
    versions: { kafka: '4.3.1' },
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
    },
  });
  process.stdout.write(`results: ${file}\n`);
  if (exactness.records_lost + exactness.records_duplicated + exactness.keys_mismatched > 0) process.exitCode = 1;
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
  try {
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: id, numPartitions: PARTITIONS, replicationFactor: 1 }] });
    await producer.connect();
    input = new SteadyLoad(producer, id, RATE, KEYS);
    const env = offsetHashEnv(id, PERSIST_EVERY_MS, SESSION_TIMEOUT_MS);
    const logFile = process.env.BENCH_WORKER_LOG;
    stateRoot = variant === 'standby' ? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-failover-')) : undefined;
    const own = (name: string) => (stateRoot ? { ...env, KFT_STATE_DIR: path.join(stateRoot, name), KFT_STANDBY_REPLICAS: '1' } : env);
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
    a.kill();
    const atKillEnd = await endOffsets(admin, snapshotTopic);
    const writtenLastSecond = killedPartitions.reduce((n, p) => n + Number((atKillEnd.get(p) ?? 0n) - (secondBefore.get(p) ?? 0n)), 0);
    const killedAt = performance.now();
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
  }
}

runMain(main);
