// Recovery (issue 8, item 3): 100,000 snapshots (--quick: 10,000) in a flow's snapshot topic, written
// through the Kafka backend in transactional mode (KafkaSnapshotBackend → forPartition(p).write, at
// most 256 writes per transaction, each with the offset commit, as a running worker writes them)
// over the 6 partitions of a fresh snapshot topic. Then the same partition set is read back, in
// turn, interleaved, 3 runs each (--quick: 1):
//
//   ours    what a running worker does for each newly assigned partition, all six at once:
//           forPartition (fences: a new transactional producer, InitProducerId, aborting what a
//           crashed owner left open; reads the committed offset, require_stable) and recover()
//           iterated to the end — ListOffsets for the bound, the read_committed read to it, each
//           key's kind and offset read off its envelope (its state is decoded when the engine first
//           uses the key, not at recovery: the keys are not used here). The backend is the worker's, its clients connected
//           (one untimed recovery first), as in a rebalance or a failover.
//   ours_cold  the same through a fresh client and backend: a worker's first assignment after it
//           started (its connections; until issue 14 also twice ≈ 300 ms in kafkajs's
//           findGroupCoordinator of a cluster without metadata, see docs).
//   raw     a plain kafkajs 2.2.4 consumer (read_committed, its default) from the beginning of the
//           snapshot topic, eachBatch keeping each key's latest value in a Map (the least any
//           recovery does; no decode), timed from its GROUP_JOIN event (a recovering worker is a
//           member already: the join and its initial rebalance delay are not recovery) to its
//           last record.
//   reader  for scale: the group-less PartitionReader (kafka/) recovery itself reads with, the six
//           partitions at once, counting records.
//
// recovery_vs_raw = ours' snapshots/s ÷ raw's (goal ≥ 0.9). `npm run bench:recovery [-- --quick]`.
// BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each timed `ours` run there (ours-<run>.cpuprofile;
// summarize with bench/lib/profile-summary.ts).
import os from 'node:os';
import { Registry } from 'prom-client';
import { sized } from './lib/args';
import { ownCpuMs } from './lib/cpu';
import { startProfile } from './lib/in-process-profile';
import { startProgress } from './lib/progress';
import { benchKafka, deleteGroups, deleteTopics, uniqueName } from './lib/records';
import { writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import { FlowMetrics } from '../flow/metrics';
import { createKafkaClient, GroupMembership, KafkaAdmin, type KafkaClient, PartitionReader } from '../kafka';
import { brokersFromEnv } from '../config/env';
import { KafkaSnapshotBackend } from '../persistence/kafka';

const SNAPSHOTS = sized(100_000, 10_000);
const PARTITIONS = 6;
const RUNS = Number(process.env.BENCH_RUNS ?? sized(3, 1));
/** Writes per write() call: the engine hands the backend at most maxWritesPerTransaction (256) at once. */
const WRITE_BATCH = 256;
const FLOW = 'bench-recovery';

/** The state bench:throughput's flow persists (running totals), with a little more in it. */
interface State {
  count: number;
  total: number;
  lastOrderId: string;
}
const stateOf = (i: number): State => ({ count: 1 + (i % 977), total: (i * 37) % 100_000, lastOrderId: `order-${i.toString(36).padStart(8, '0')}` });

interface Reading {
  ms: number;
  snapshots: number;
  details?: Record<string, unknown>;
}

async function main(): Promise<void> {
  const brokers = brokersFromEnv();
  const client = createKafkaClient({ brokers, clientId: 'bench-recovery', logLevel: 'error' });
  const admin = new KafkaAdmin(client);
  const run = uniqueName('bench-recovery');
  const input = `${run}-input`;
  const snapshotTopic = `${run}-snapshots`;
  const groupId = `${run}-group`;
  const topics = [input, snapshotTopic];
  const groups = [groupId];
  const figures: Record<string, number> = {};
  const notes: Record<string, unknown> = {
    snapshots: SNAPSHOTS,
    keys: SNAPSHOTS,
    partitions: PARTITIONS,
    runs: RUNS,
    statistic: 'median',
    written: 'transactional mode, ≤ 256 writes per transaction with the offset commit, one key once each (a compacted topic before compaction holds several per key; see docs)',
    state: 'JSON {count,total,lastOrderId} in the kafka-flow envelope, ≈ 80 bytes a record',
  };
  const membership = new GroupMembership();
  const writer = client.kafka.consumer({ groupId, sessionTimeout: 30_000, heartbeatInterval: 1_000 });

  try {
    await admin.connect();
    await admin.ensureTopics([{ topic: input, partitions: PARTITIONS }]);
    // The writing worker's group member: every transaction carries its generation.
    membership.attach(writer);
    await writer.connect();
    await writer.subscribe({ topic: input, fromBeginning: true });
    await writer.run({ autoCommit: false, eachBatch: async () => {} });
    await membership.waitForJoin(60_000);

    const written = await writeSnapshots(client, { input, snapshotTopic, groupId, membership });
    notes.write = written;
    await writer.disconnect();

    const names = { input, snapshotTopic, groupId, membership };
    const warmClient = createKafkaClient({ brokers, clientId: 'bench-recovery-ours', logLevel: 'error' });
    const warm = backendFor(warmClient, names);
    await oursRecover(warm, names); // untimed: connects the worker's clients
    const contestants = ['ours', 'ours_cold', 'raw', 'reader'] as const;
    const readings: Record<(typeof contestants)[number], Reading[]> = { ours: [], ours_cold: [], raw: [], reader: [] };
    const progress = startProgress('recovery reads', RUNS * contestants.length, { plainEveryMs: 5_000 });
    for (let i = 0; i < RUNS; i++) {
      // Interleaved, in a rotating order, so a neighbour's burst of load does not fall on one contestant only.
      const order = contestants.map((_, j, all) => all[(i + j) % all.length]!);
      for (const who of order) {
        const load = os.loadavg()[0] ?? 0;
        const cpuBefore = ownCpuMs();
        const profile = who === 'ours' && process.env.BENCH_CPU_PROF ? await startProfile(process.env.BENCH_CPU_PROF) : undefined;
        const r =
          who === 'ours'
            ? await oursRecover(warm, names).finally(() => profile?.stop(`ours-${i + 1}`))
            : who === 'ours_cold'
              ? await oursCold(brokers, names)
              : who === 'raw'
                ? await rawRead(brokers, snapshotTopic, groups)
                : await readerRead(client, snapshotTopic);
        if (r.snapshots !== SNAPSHOTS) throw new Error(`${who} read ${r.snapshots} snapshots, ${SNAPSHOTS} were written`);
        // CPU of the whole process while the contestant ran (each runs alone): steadier than wall time on a shared machine.
        r.details = { ...r.details, cpu_ms: Math.round(ownCpuMs() - cpuBefore), load_avg_1m: Number(load.toFixed(2)) };
        readings[who].push(r);
        progress.tick();
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    progress.stop();
    await warm.close();

    const rate = (who: keyof typeof readings) => Math.round(perSecond(SNAPSHOTS, median(readings[who].map((r) => r.ms))));
    const rows: Row[] = [];
    const labels = {
      ours: 'ours: forPartition (fence) + recover(), 6 partitions at once',
      ours_cold: 'ours, cold: the same through a fresh client and backend',
      raw: 'raw kafkajs consumer, eachBatch → Map, from join',
      reader: 'PartitionReader (group-less), count only',
    };
    const figureName = { ours: 'recovery', ours_cold: 'recovery_cold', raw: 'raw', reader: 'reader' };
    for (const who of contestants) {
      const ms = median(readings[who].map((r) => r.ms));
      figures[`${figureName[who]}_snapshots_per_s`] = rate(who);
      const cpuMs = median(readings[who].map((r) => Number(r.details?.cpu_ms ?? 0)));
      figures[`${figureName[who]}_cpu_ms`] = Math.round(cpuMs);
      rows.push({ contestant: labels[who], median_ms: Math.round(ms), cpu_ms: Math.round(cpuMs), snapshots_per_s: rate(who), runs: readings[who].length });
      notes[who] = readings[who].map((r) => ({ ms: Math.round(r.ms), ...r.details }));
    }
    figures.recovery_vs_raw = Number(ratio(rate('ours'), rate('raw')).toFixed(3));
    figures.recovery_vs_reader = Number(ratio(rate('ours'), rate('reader')).toFixed(3));
    figures.recovery_cold_vs_raw = Number(ratio(rate('ours_cold'), rate('raw')).toFixed(3));
    figures.recovery_ms = Math.round(median(readings.ours.map((r) => r.ms)));
    figures.recovery_cold_ms = Math.round(median(readings.ours_cold.map((r) => r.ms)));
    printTable(`recovery: ${SNAPSHOTS.toLocaleString('en-US')} snapshots over ${PARTITIONS} partitions, median of ${RUNS}`, rows);
    process.stdout.write(`recovery_vs_raw = ${figures.recovery_vs_raw} (goal >= 0.9)\n`);
    const file = writeResults('recovery', figures, { versions: { kafka: '4.3.1' }, notes });
    process.stdout.write(`results: ${file}\n`);
  } finally {
    await writer.disconnect().catch(() => undefined);
    await admin.close().catch(() => undefined);
    await deleteTopics(topics, brokers);
    await deleteGroups(groups, brokers);
  }
}

interface Names {
  input: string;
  snapshotTopic: string;
  groupId: string;
  membership: GroupMembership;
}

function backendFor(client: KafkaClient, n: Names): KafkaSnapshotBackend<State> {
  return new KafkaSnapshotBackend<State>({
    client,
    flowName: FLOW,
    groupId: n.groupId,
    inputTopic: n.input,
    snapshotTopic: n.snapshotTopic,
    transactionalIdPrefix: `${n.snapshotTopic}-tx`,
    transactional: true,
    metrics: FlowMetrics.of(new Registry()),
  });
}

/** SNAPSHOTS keys spread over the partitions (key i on partition i % PARTITIONS), all partitions written at once. */
async function writeSnapshots(client: KafkaClient, n: Names) {
  const backend = backendFor(client, n);
  const progress = startProgress('write snapshots', SNAPSHOTS, { plainEveryMs: 5_000 });
  const started = performance.now();
  let transactions = 0;
  try {
    await backend.ensureTopic(PARTITIONS);
    await Promise.all(
      Array.from({ length: PARTITIONS }, async (_, p) => {
        const persistence = await backend.forPartition({
          topic: n.input,
          partition: p,
          generation: () => n.membership.current(),
          assignedOffset: 0,
        });
        const keys: number[] = [];
        for (let i = p; i < SNAPSHOTS; i += PARTITIONS) keys.push(i);
        for (let from = 0; from < keys.length; from += WRITE_BATCH) {
          const slice = keys.slice(from, from + WRITE_BATCH);
          const result = await persistence.write({
            writes: slice.map((i, j) => ({ key: `key-${i}`, snapshot: { state: stateOf(i), offset: from + j } })),
          });
          if (result.statuses.some((s) => s !== 'applied')) throw new Error(`partition ${p}: a snapshot write was not applied`);
          transactions++;
          progress.tick(slice.length);
        }
      }),
    );
  } finally {
    progress.stop();
    await backend.close();
  }
  const ms = performance.now() - started;
  return { ms: Math.round(ms), snapshots_per_s: Math.round(perSecond(SNAPSHOTS, ms)), transactions };
}

/** A first recovery after start: a fresh client and backend. */
async function oursCold(brokers: string[], n: Names): Promise<Reading> {
  const backend = backendFor(createKafkaClient({ brokers, clientId: 'bench-recovery-cold', logLevel: 'error' }), n);
  try {
    return await oursRecover(backend, n);
  } finally {
    await backend.close();
  }
}

/** A worker's recovery of all partitions at once: forPartition (the fence) and recover() of each. */
async function oursRecover(backend: KafkaSnapshotBackend<State>, n: Names): Promise<Reading> {
  const started = performance.now();
  const per = await Promise.all(
    Array.from({ length: PARTITIONS }, async (_, p) => {
      const persistence = await backend.forPartition({
        topic: n.input,
        partition: p,
        generation: () => n.membership.current(),
      });
      let keys = 0;
      let checksum = 0;
      for await (const found of persistence.recover()) {
        keys++;
        checksum += found.snapshot?.offset ?? 0; // what the engine takes at recovery (states are decoded on first use)
      }
      return { keys, checksum, stats: persistence.lastRecovery };
    }),
  );
  const ms = performance.now() - started;
  const stats = per.map((x) => x.stats);
  return {
    ms,
    snapshots: per.reduce((a, x) => a + x.keys, 0),
    details: {
      fence_ms_max: Math.round(Math.max(...stats.map((s) => s?.fenceMs ?? 0))),
      read_ms_max: Math.round(Math.max(...stats.map((s) => s?.readMs ?? 0))),
      fetches: stats.reduce((a, s) => a + (s?.fetches ?? 0), 0),
      records: stats.reduce((a, s) => a + (s?.records ?? 0), 0),
      bytes: stats.reduce((a, s) => a + (s?.bytes ?? 0), 0),
    },
  };
}

/** A plain kafkajs consumer of the snapshot topic, from the beginning, each key's latest value kept. */
async function rawRead(brokers: string[], snapshotTopic: string, groups: string[]): Promise<Reading> {
  const groupId = uniqueName('bench-recovery-raw');
  groups.push(groupId);
  const consumer = benchKafka('bench-recovery-raw', brokers).consumer({ groupId });
  const latest = new Map<string, Buffer>();
  let records = 0;
  let joinedAt: number | undefined;
  let finishedAt: number | undefined;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joinedAt ??= performance.now();
  });
  const started = performance.now();
  try {
    await consumer.connect();
    await consumer.subscribe({ topic: snapshotTopic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          records++;
          const key = m.key!.toString('utf8');
          if (m.value === null) latest.delete(key);
          else latest.set(key, m.value);
        }
        // Every key was written once: all are read when all are here.
        if (latest.size >= SNAPSHOTS) {
          finishedAt ??= performance.now();
          finish();
        }
      },
    });
    const timeout = setTimeout(finish, 300_000);
    await finished;
    clearTimeout(timeout);
    if (finishedAt === undefined || joinedAt === undefined) throw new Error(`raw read: ${latest.size} of ${SNAPSHOTS} keys in 300 s`);
    return {
      ms: finishedAt - joinedAt,
      snapshots: latest.size,
      details: { join_ms: Math.round(joinedAt - started), records },
    };
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
}

/** The group-less reader recovery uses, all partitions at once, counting records. */
async function readerRead(client: KafkaClient, snapshotTopic: string): Promise<Reading> {
  const reader = new PartitionReader(client);
  const started = performance.now();
  try {
    const keys = new Set<string>();
    let fetches = 0;
    await Promise.all(
      Array.from({ length: PARTITIONS }, async (_, p) => {
        const result = await reader.read({
          topic: snapshotTopic,
          partition: p,
          fromOffset: '0',
          onRecords: (records) => {
            for (const r of records) keys.add(r.key!.toString('utf8'));
          },
        });
        fetches += result.fetches;
      }),
    );
    return { ms: performance.now() - started, snapshots: keys.size, details: { fetches } };
  } finally {
    await reader.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
