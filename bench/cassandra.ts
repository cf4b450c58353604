// The Cassandra backend on the local Cassandra: persist 10,000 keys × 1 KiB snapshots through a
// partition's persistence (snapshot rows, key rows, then the offset commit, in batches of 1,000 as
// the engine hands them over), with the snapshot fence on ('lwt') and off ('none'), then recover
// them (list the keys table's segments, read every snapshot).
//
// - write: the keys' first persist (new rows: INSERT … IF NOT EXISTS vs kafka-flow's plain UPDATE)
// - update: a second persist of the same keys at newer offsets (UPDATE … IF generation <= ? AND
//   offset < ? vs plain UPDATE) — what a running partition does every persistEvery
// - cassandra_lwt_vs_plain_write / _update: time with LWT ÷ time without, same run, interleaved
// - key listing: the keys table holds 40,000 rows (past keyScanRows' default 2,000): the default
//   recovery (a scan that stops at 2,001 rows, then the segments) beside the segments alone and a
//   scan of the whole table: cassandra_recovery_default_vs_segments (the probe's cost),
//   cassandra_recovery_scan_vs_segments (what a scan saves where a table is small enough)
// - recovery: a fresh client recovers the partition's 10,000 keys, reading 100 snapshots per query
//   (`key IN (...)`, the default) and, side by side in the same run, one key per query
//   (recoveryBatchSize 1, as before batched reads): cassandra_recovery_batched_vs_single
// - the opt-in by-partition layout (layout 'by-partition', 256 buckets, fenced): the same
//   persists (no key rows: that layout has no keys table in snapshots mode), and its recovery (scan
//   the partition's buckets) interleaved with the two above: cassandra_recovery_keys_per_s_by_partition,
//   cassandra_recovery_by_partition_vs_single and _vs_batched (speed ratios, same run)
// - fencing 'timestamp' (plain writes at the owner's fence timestamp; in the kafka-flow layout each
//   also writes its key row at it): the same persists in both layouts, interleaved with the others:
//   cassandra_timestamp_*_keys_per_s, cassandra_lwt_vs_timestamp_write / _update (time ÷ time)
// Each configuration writes its own tables and a fresh partition per run; persist figures are
// medians of 3 runs after one untimed warm-up, recovery figures medians of 5 rounds (the five
// recoveries in rotating order, each round a fresh client per recovery).
// `npm run bench:cassandra [-- --quick]` (quick: 1,000 keys, 1 run).
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { Client } from 'cassandra-driver';
import { sized } from './lib/args';
import { startProgress } from './lib/progress';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { ownCpuMs } from './lib/cpu';
import { measure, median, perSecond, ratio } from './lib/timing';
import { formatHostPort, readEnv } from '../config/env';
import { CassandraBackend, type Fencing, type SnapshotLayout } from '../persistence/cassandra';
import { KEY_SCAN_ROWS } from '../persistence/cassandra/options';
import { InMemoryOffsetCommitter } from '../persistence/memory';
import type { KeyWrite } from '../flow/ports';
import { VERSIONS } from '../infra/settings';

const KEYS = sized(10_000, 1_000);
const RUNS = sized(3, 1);
const RECOVERY_ROUNDS = sized(5, 1);
const BUCKETS = 256;
const BATCH = 1_000;
const TOPIC = 'bench';

type State = { payload: string };

/** A 1 KiB state: base64 of random bytes, so compression (off below 10 KB anyway) has nothing to gain. */
function state(i: number): State {
  return { payload: `${i}:${randomBytes(760).toString('base64')}`.slice(0, 1024 - 14) };
}

async function main(): Promise<void> {
  const loadAtStart = loadavg().map((l) => Math.round(l * 100) / 100);
  const contactPoints = readEnv().cassandraContactPoints.map(formatHostPort);
  const keyspace = `bench_cassandra_${Date.now()}`;
  /** A configuration: the fence, and the snapshots' layout. */
  type Config = 'none' | 'lwt' | 'bp' | 'ts' | 'tsbp';
  const configs: Record<Config, { fencing: Fencing; layout: SnapshotLayout }> = {
    none: { fencing: 'none', layout: 'kafka-flow' },
    lwt: { fencing: 'lwt', layout: 'kafka-flow' },
    bp: { fencing: 'lwt', layout: 'by-partition' },
    ts: { fencing: 'timestamp', layout: 'kafka-flow' },
    tsbp: { fencing: 'timestamp', layout: 'by-partition' },
  };
  const start = (config: Config, recoveryBatchSize?: number, keyScanRows?: number) =>
    CassandraBackend.start<State, unknown>({
      recoveryBatchSize,
      keyScanRows,
      // BENCH_CASSANDRA_MAX_READS: the backend's maxConcurrentReads (64): reads in flight, a quarter of them recovery batches.
      maxConcurrentReads: process.env.BENCH_CASSANDRA_MAX_READS ? Number(process.env.BENCH_CASSANDRA_MAX_READS) : undefined,
      applicationId: 'bench',
      groupId: 'bench',
      keyspace,
      contactPoints,
      fencing: configs[config].fencing,
      ...(configs[config].layout === 'by-partition' ? { layout: 'by-partition' as const, buckets: BUCKETS } : {}),
      tables: { snapshots: `${config}_snapshots`, keys: `${config}_keys` },
    });
  const backends = { none: await start('none'), lwt: await start('lwt'), bp: await start('bp'), ts: await start('ts'), tsbp: await start('tsbp') };
  const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}-${randomBytes(4).toString('hex')}`);
  const states = keys.map((_, i) => state(i));
  const times: Record<string, number[]> = {
    none_write: [],
    lwt_write: [],
    bp_write: [],
    none_update: [],
    lwt_update: [],
    bp_update: [],
    ts_write: [],
    ts_update: [],
    tsbp_write: [],
    tsbp_update: [],
    recovery: [],
    recovery_segments: [],
    recovery_scan: [],
    recovery_single: [],
    recovery_by_partition: [],
  };
  /** This process's CPU during each recovery: how much of its time is ours (decoding, the driver), not the node's. */
  const cpu: Record<string, number[]> = { recovery: [], recovery_segments: [], recovery_scan: [], recovery_single: [], recovery_by_partition: [] };
  const progress = startProgress('cassandra', (RUNS + 1) * KEYS * 10 + RECOVERY_ROUNDS * KEYS * 5, { plainEveryMs: 5_000 });

  type Persistence = Awaited<ReturnType<(typeof backends)['lwt']['forPartition']>>;
  const persist = (persistence: Persistence, config: Config, offsetBase: number, addKey: boolean) =>
    measure(async () => {
      for (let from = 0; from < KEYS; from += BATCH) {
        const writes: KeyWrite<State, unknown>[] = [];
        for (let i = from; i < Math.min(KEYS, from + BATCH); i++) {
          writes.push({ key: keys[i]!, snapshot: { state: states[i]!, offset: offsetBase + i }, addKey });
        }
        const result = await persistence.write({ writes, commitOffset: offsetBase + from + writes.length });
        if (!result.committed || result.statuses.some((s) => s !== 'applied')) throw new Error(`bench: a ${config} write was not applied`);
        progress.tick(writes.length);
      }
    });

  try {
    // run 0 is the warm-up (prepared statements, JIT, Cassandra's memtables): not counted.
    for (let run = 0; run <= RUNS; run++) {
      const rotation: Config[] = ['none', 'lwt', 'bp', 'ts', 'tsbp'];
      const order = [...rotation.slice(run % rotation.length), ...rotation.slice(0, run % rotation.length)];
      for (const config of order) {
        // One partition's persistence for both persists, as a running partition keeps it.
        const persistence = await backends[config].forPartition({
          topic: TOPIC,
          partition: run,
          generation: 1,
          committer: new InMemoryOffsetCommitter(),
        });
        const write = await persist(persistence, config, 0, true);
        const update = await persist(persistence, config, KEYS, false);
        if (run > 0) {
          times[`${config}_write`]!.push(write);
          times[`${config}_update`]!.push(update);
        }
      }
    }
    for (let round = 1; round <= RECOVERY_ROUNDS; round++) {
      // A fresh client, as a newly assigned owner would have: batched and one-key-per-query
      // recoveries of a kafka-flow layout partition, and the by-partition layout's scan of its
      // own partition (the same keys and states), in rotating order.
      const run = ((round - 1) % RUNS) + 1;
      // The keys table holds (RUNS + 1) × KEYS rows (the full run: past the default keyScanRows, so
      // the default recovery scans KEY_SCAN_ROWS + 1 rows, finds the table too big and lists the
      // segments); beside it the segments alone (keyScanRows 0) and a scan of the whole table.
      const rotation: Array<[string, Config, number, number | undefined]> = [
        ['recovery', 'lwt', 100, undefined],
        ['recovery_segments', 'lwt', 100, 0],
        ['recovery_scan', 'lwt', 100, (RUNS + 2) * KEYS],
        ['recovery_single', 'lwt', 1, undefined],
        ['recovery_by_partition', 'bp', 100, undefined],
      ];
      const shift = round % rotation.length;
      const order = [...rotation.slice(shift), ...rotation.slice(0, shift)];
      for (const [figure, config, batchSize, keyScanRows] of order) {
        const fresh = await start(config, batchSize, keyScanRows);
        try {
          const persistence = await fresh.forPartition({ topic: TOPIC, partition: run, generation: 2, committer: new InMemoryOffsetCommitter() });
          let recovered = 0;
          const cpuBefore = ownCpuMs();
          times[figure]!.push(
            await measure(async () => {
              for await (const found of persistence.recover()) {
                if (found.snapshot?.offset === undefined) throw new Error('bench: recovered a key without a snapshot');
                recovered++;
                progress.tick();
              }
            }),
          );
          cpu[figure]!.push(ownCpuMs() - cpuBefore);
          if (recovered !== KEYS) throw new Error(`bench: recovered ${recovered} keys (${figure}), wrote ${KEYS}`);
        } finally {
          await fresh.close();
        }
      }
    }
  } finally {
    progress.stop();
    const lwtStats = backends.lwt.snapshots!.stats;
    const bpStats = backends.bp.snapshots!.stats;
    await backends.none.close();
    await backends.lwt.close();
    await backends.bp.close();
    await backends.ts.close();
    await backends.tsbp.close();
    const admin = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    await admin.connect();
    await admin.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`).catch(() => undefined);
    await admin.shutdown();
    process.stdout.write(`lwt statements per snapshot write: ${(lwtStats.writeStatements / Math.max(1, lwtStats.applied)).toFixed(3)}\n`);
    process.stdout.write(`by-partition lwt statements per snapshot write: ${(bpStats.writeStatements / Math.max(1, bpStats.applied)).toFixed(3)}\n`);
  }

  const ms = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])) as Record<string, number>;
  const figures = {
    cassandra_plain_write_keys_per_s: round(perSecond(KEYS, ms.none_write!)),
    cassandra_lwt_write_keys_per_s: round(perSecond(KEYS, ms.lwt_write!)),
    cassandra_lwt_vs_plain_write: round(ratio(ms.lwt_write!, ms.none_write!), 3),
    cassandra_plain_update_keys_per_s: round(perSecond(KEYS, ms.none_update!)),
    cassandra_lwt_update_keys_per_s: round(perSecond(KEYS, ms.lwt_update!)),
    cassandra_lwt_vs_plain_update: round(ratio(ms.lwt_update!, ms.none_update!), 3),
    cassandra_recovery_keys_per_s: round(perSecond(KEYS, ms.recovery!)),
    cassandra_recovery_single_keys_per_s: round(perSecond(KEYS, ms.recovery_single!)),
    cassandra_recovery_batched_vs_single: round(ratio(ms.recovery_single!, ms.recovery!), 2),
    cassandra_recovery_client_cpu_ms: round(median(cpu.recovery!)),
    // The key listing: segments only, and a scan of the whole keys table (40,000 rows), against the default.
    cassandra_recovery_segments_keys_per_s: round(perSecond(KEYS, ms.recovery_segments!)),
    cassandra_recovery_scan_keys_per_s: round(perSecond(KEYS, ms.recovery_scan!)),
    cassandra_recovery_scan_vs_segments: round(ratio(ms.recovery_segments!, ms.recovery_scan!), 2),
    cassandra_recovery_default_vs_segments: round(ratio(ms.recovery_segments!, ms.recovery!), 2),
    cassandra_recovery_single_client_cpu_ms: round(median(cpu.recovery_single!)),
    cassandra_recovery_keys_per_s_by_partition: round(perSecond(KEYS, ms.recovery_by_partition!)),
    cassandra_recovery_by_partition_vs_single: round(ratio(ms.recovery_single!, ms.recovery_by_partition!), 2),
    cassandra_recovery_by_partition_vs_batched: round(ratio(ms.recovery!, ms.recovery_by_partition!), 2),
    cassandra_recovery_by_partition_client_cpu_ms: round(median(cpu.recovery_by_partition!)),
    cassandra_by_partition_lwt_write_keys_per_s: round(perSecond(KEYS, ms.bp_write!)),
    cassandra_by_partition_lwt_update_keys_per_s: round(perSecond(KEYS, ms.bp_update!)),
    cassandra_by_partition_vs_kafka_flow_lwt_update: round(ratio(ms.bp_update!, ms.lwt_update!), 3),
    // fencing 'timestamp': plain writes at the owner's fence timestamp (+ the key row at it, kafka-flow layout).
    cassandra_timestamp_write_keys_per_s: round(perSecond(KEYS, ms.ts_write!)),
    cassandra_timestamp_update_keys_per_s: round(perSecond(KEYS, ms.ts_update!)),
    cassandra_lwt_vs_timestamp_write: round(ratio(ms.lwt_write!, ms.ts_write!), 3),
    cassandra_lwt_vs_timestamp_update: round(ratio(ms.lwt_update!, ms.ts_update!), 3),
    cassandra_by_partition_timestamp_update_keys_per_s: round(perSecond(KEYS, ms.tsbp_update!)),
    cassandra_by_partition_lwt_vs_timestamp_update: round(ratio(ms.bp_update!, ms.tsbp_update!), 3),
  };
  printTable(`cassandra: ${KEYS.toLocaleString('en-US')} keys × 1 KiB, batches of ${BATCH}, median of ${RUNS}`, [
    { persist: 'first write (new keys)', 'plain ms': ms.none_write!, 'lwt ms': ms.lwt_write!, 'plain keys/s': figures.cassandra_plain_write_keys_per_s, 'lwt keys/s': figures.cassandra_lwt_write_keys_per_s, 'lwt ÷ plain': figures.cassandra_lwt_vs_plain_write },
    { persist: 'update (newer offsets)', 'plain ms': ms.none_update!, 'lwt ms': ms.lwt_update!, 'plain keys/s': figures.cassandra_plain_update_keys_per_s, 'lwt keys/s': figures.cassandra_lwt_update_keys_per_s, 'lwt ÷ plain': figures.cassandra_lwt_vs_plain_update },
  ]);
  printTable("cassandra fencing 'timestamp' (plain writes at the owner's fence timestamp)", [
    { persist: 'first write (new keys)', layout: 'kafka-flow (+ key rows)', ms: ms.ts_write!, 'keys/s': figures.cassandra_timestamp_write_keys_per_s, 'lwt ÷ timestamp': figures.cassandra_lwt_vs_timestamp_write },
    { persist: 'update (newer offsets)', layout: 'kafka-flow (+ key rows)', ms: ms.ts_update!, 'keys/s': figures.cassandra_timestamp_update_keys_per_s, 'lwt ÷ timestamp': figures.cassandra_lwt_vs_timestamp_update },
    { persist: 'update (newer offsets)', layout: `by-partition (${BUCKETS} buckets)`, ms: ms.tsbp_update!, 'keys/s': figures.cassandra_by_partition_timestamp_update_keys_per_s, 'lwt ÷ timestamp': figures.cassandra_by_partition_lwt_vs_timestamp_update },
  ]);
  printTable(`cassandra by-partition layout (${BUCKETS} buckets, lwt, no key rows)`, [
    { persist: 'first write (new keys)', 'ms': ms.bp_write!, 'keys/s': figures.cassandra_by_partition_lwt_write_keys_per_s },
    { persist: 'update (newer offsets)', 'ms': ms.bp_update!, 'keys/s': figures.cassandra_by_partition_lwt_update_keys_per_s, 'time ÷ kafka-flow layout lwt': figures.cassandra_by_partition_vs_kafka_flow_lwt_update },
  ]);
  printTable(`cassandra recovery (fresh client: list the keys — the table holds ${((RUNS + 1) * KEYS).toLocaleString('en-US')} rows — read every snapshot)`, [
    { reads: `100 keys per query (default: ${(RUNS + 1) * KEYS > KEY_SCAN_ROWS ? 'a scan, too big, the segments' : 'a scan'})`, keys: KEYS, ms: ms.recovery!, 'client cpu ms': figures.cassandra_recovery_client_cpu_ms, 'keys/s': figures.cassandra_recovery_keys_per_s },
    { reads: 'listed by segments only (keyScanRows 0)', keys: KEYS, ms: ms.recovery_segments!, 'client cpu ms': round(median(cpu.recovery_segments!)), 'keys/s': figures.cassandra_recovery_segments_keys_per_s },
    { reads: 'listed by a scan of the whole table', keys: KEYS, ms: ms.recovery_scan!, 'client cpu ms': round(median(cpu.recovery_scan!)), 'keys/s': figures.cassandra_recovery_scan_keys_per_s },
    { reads: 'one key per query', keys: KEYS, ms: ms.recovery_single!, 'client cpu ms': figures.cassandra_recovery_single_client_cpu_ms, 'keys/s': figures.cassandra_recovery_single_keys_per_s },
    { reads: `by-partition layout (${BUCKETS} buckets scanned)`, keys: KEYS, ms: ms.recovery_by_partition!, 'client cpu ms': figures.cassandra_recovery_by_partition_client_cpu_ms, 'keys/s': figures.cassandra_recovery_keys_per_s_by_partition },
    { reads: 'batched ÷ single (speed)', keys: KEYS, ms: '-', 'client cpu ms': '-', 'keys/s': figures.cassandra_recovery_batched_vs_single },
    { reads: 'scan ÷ segments (speed)', keys: KEYS, ms: '-', 'client cpu ms': '-', 'keys/s': figures.cassandra_recovery_scan_vs_segments },
    { reads: 'default ÷ segments (speed)', keys: KEYS, ms: '-', 'client cpu ms': '-', 'keys/s': figures.cassandra_recovery_default_vs_segments },
    { reads: 'by-partition ÷ single (speed)', keys: KEYS, ms: '-', 'client cpu ms': '-', 'keys/s': figures.cassandra_recovery_by_partition_vs_single },
    { reads: 'by-partition ÷ batched (speed)', keys: KEYS, ms: '-', 'client cpu ms': '-', 'keys/s': figures.cassandra_recovery_by_partition_vs_batched },
  ]);
  const file = writeResults('cassandra', figures, {
    versions: { cassandra: VERSIONS.cassandra },
    notes: {
      keys: KEYS,
      stateBytes: 1024,
      batch: BATCH,
      runs: RUNS,
      recoveryRounds: RECOVERY_ROUNDS,
      buckets: BUCKETS,
      medianMs: ms,
      loadAverageAtStart: loadAtStart,
      settings: 'defaults: maxConcurrentWrites 64, maxConcurrentReads 64, LOCAL_QUORUM, serial SERIAL, one node',
      timed: 'per batch: snapshot rows, key rows (first write only; none in the by-partition layout), then the offset commit (in memory)',
      loadAverageAtEnd: loadavg().map((l) => Math.round(l * 100) / 100),
    },
  });
  process.stdout.write(`results: ${file}\n`);
}

function round(n: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
