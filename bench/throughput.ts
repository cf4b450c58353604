// Throughput side by side (issue 8, items 1 and 2): one freshly produced topic (6 partitions,
// 1,000,000 small JSON records over 10,000 keys; --quick: 100,000 over 1,000), consumed in turn by
//   raw     a plain kafkajs eachBatch consumer that JSON-parses every value (bench/lib/raw.ts),
//   streams the same running-totals aggregation as a Kafka Streams app, exactly-once v2, commit
//           interval 1 s (bench/anchors/kafka-streams/, bench/lib/anchors.ts),
//   ours    one worker of this project folding running totals, transactional Kafka persistence
//           every 1 s (bench/flows/totals.ts, bench/lib/ours.ts).
// Every contestant is timed the same way, to the moment its group's committed offsets equal the end
// offsets on all partitions: end to end from its start (consumer created, JVM or worker spawned),
// and steady state from its first record processed (see the figures below).
// `npm run bench:throughput [-- --quick]`; BENCH_BACKEND=memory runs ours with the memory backend,
// BENCH_OURS=skip leaves it out, BENCH_ONLY=ours (or raw,streams,…) runs only those, BENCH_RUNS=n
// sets the runs per contestant (full 3, quick 1), BENCH_CPU_PROF=<dir> writes the worker's V8 CPU
// profiles there (node --cpu-prof).
import { isQuick, sized } from './lib/args';
import { runKafkaStreams, STREAMS_VERSION } from './lib/anchors';
import { runOurs } from './lib/ours';
import { type ContestantResult, rawKafkajsConsume } from './lib/raw';
import { deleteTopics, produceRecords, uniqueName } from './lib/records';
import { writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import { timedRun, waitForQuiet } from './lib/timed-run';

const PARTITIONS = 6;
const RECORDS = sized(1_000_000, 100_000);
const KEYS = sized(10_000, 1_000);
/**
 * Before every run: a pause, so the previous contestant's clean-up (group leave, topic deletion) is
 * not in the next one's figure, then until the broker and the machine are quiet (waitForQuiet), at
 * most SETTLE_MAX_MS in all.
 */
const SETTLE_MS = 2_000;
const SETTLE_MAX_MS = 20_000;

/**
 * Runs per contestant, interleaved and rotated: run 1 raw, streams, ours; run 2 streams, ours, raw;
 * run 3 ours, raw, streams (so with 3 runs each contestant follows each other one, and starts a
 * round, once); figures are the medians. BENCH_RUNS overrides.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? sized(3, 1));

interface Contestant {
  key: 'raw' | 'streams' | 'ours';
  label: string;
  run: () => Promise<ContestantResult>;
  results: ContestantResult[];
  /** Set when a run failed: later runs skip it. */
  error?: string;
}

async function main(): Promise<number> {
  if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`BENCH_RUNS=${process.env.BENCH_RUNS}: a positive integer please`);
  const topic = uniqueName('bench-throughput');
  const figures: Record<string, number> = {};
  const notes: Record<string, unknown> = {
    topic_partitions: PARTITIONS,
    records: RECORDS,
    keys: KEYS,
    runs: RUNS,
    record: 'key "k<i % keys>", value {"n":i,"amount":i % 100} (bench/lib/records.ts)',
    finishing_line: "from the contestant's start until its group's committed offsets equal the end offsets on all partitions; median of the runs",
  };
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const oursBackend = process.env.BENCH_BACKEND === 'memory' ? 'memory' : 'kafka';
  const contestants: Contestant[] = [
    { key: 'raw', label: 'raw kafkajs eachBatch + JSON.parse + Map', run: () => rawKafkajsConsume({ topic }), results: [] },
    { key: 'streams', label: `Kafka Streams ${STREAMS_VERSION} (EOS v2, commit 1 s)`, run: () => runKafkaStreams({ topic, partitions: PARTITIONS }), results: [] },
    // runOurs spawns `kafka-flow-temporal worker bench/flows/totals.ts` (transactional Kafka
    // persistence, persistEvery 1 s) and times it to the same finishing line; BENCH_BACKEND=memory
    // measures the same path with in-process persistence.
    { key: 'ours', label: `ours, one worker (${oursBackend} persistence, 1 s)`, run: () => runOurs(topic, { backend: oursBackend }), results: [] },
  ]
    .filter((c) => c.key !== 'ours' || process.env.BENCH_OURS !== 'skip')
    .filter((c) => !only || only.includes(c.key)) as Contestant[];
  if (only) notes.only = only;
  if (process.env.BENCH_OURS === 'skip') notes.ours = 'skipped (BENCH_OURS=skip)';

  try {
    process.stdout.write(`producing ${RECORDS.toLocaleString('en-US')} records over ${KEYS.toLocaleString('en-US')} keys to ${topic} (${PARTITIONS} partitions)\n`);
    const produced = await produceRecords({ topic, partitions: PARTITIONS, records: RECORDS, keys: KEYS });
    notes.produce_records_per_s = Math.round(perSecond(RECORDS, produced.ms));
    for (let run = 1; run <= RUNS; run++) {
      const shift = (run - 1) % contestants.length;
      const order = [...contestants.slice(shift), ...contestants.slice(0, shift)];
      for (const [position, c] of order.entries()) {
        if (c.error) continue;
        const quiet = await waitForQuiet(SETTLE_MS, SETTLE_MAX_MS);
        if (RUNS > 1) process.stdout.write(`run ${run}/${RUNS}: ${c.label}\n`);
        if (!quiet.quiet) process.stdout.write(`  (not quiet after ${quiet.waited_ms} ms: broker ${quiet.broker_cores} cores, machine ${quiet.machine_cores} cores busy)\n`);
        await timedRun(c, c.run, { run, position: position + 1, settle: quiet });
      }
    }
  } finally {
    await deleteTopics([topic]);
  }

  // Two figures per contestant, both to the same finishing line (committed offsets at the end):
  //   e2e     from its start (consumer created; JVM or worker process spawned), the definition;
  //   steady  from its first record processed (raw: first batch in eachBatch; Kafka Streams: first
  //           record through mapValues; ours: first record folded), so start-up is left out for all.
  // fold_vs_raw and fold_vs_streams use the steady-state figures: a worker process pays a start-up
  // (tsx, Temporal workers, workflow bundle, group join, recovery) that the in-process raw baseline
  // does not. The e2e ratios are kept as fold_vs_raw_e2e and fold_vs_streams_e2e.
  const rows: Row[] = [];
  const steady: Partial<Record<Contestant['key'], number>> = {};
  const e2e: Partial<Record<Contestant['key'], number>> = {};
  const cpuPerRecord: Partial<Record<Contestant['key'], number>> = {};
  for (const c of contestants) {
    if (c.error) notes[`${c.key}_error`] = c.error;
    if (c.results.length === 0) continue;
    const ms = median(c.results.map((r) => r.ms));
    e2e[c.key] = Math.round(perSecond(c.results[0]!.records, ms));
    figures[`${c.key}_e2e_records_per_s`] = e2e[c.key]!;
    const windows = c.results.flatMap((r) => (r.steady && r.steady.ms > 0 ? [r.steady] : []));
    const steadyMs = windows.length === c.results.length ? median(windows.map((w) => w.ms)) : undefined;
    if (steadyMs !== undefined) {
      steady[c.key] = Math.round(perSecond(c.results[0]!.records, steadyMs));
      figures[`${c.key}_steady_records_per_s`] = steady[c.key]!;
    } else {
      notes[`${c.key}_steady_missing`] = 'a run had no first-record marker: no steady-state figure';
    }
    const cpus = windows.flatMap((w) => (w.cpuMs !== undefined ? [(w.cpuMs * 1000) / w.records] : []));
    if (cpus.length === c.results.length) {
      cpuPerRecord[c.key] = Number(median(cpus).toFixed(2));
      figures[`${c.key}_cpu_us_per_record`] = cpuPerRecord[c.key]!;
    }
    notes[c.key] = {
      median_ms: Math.round(ms),
      median_steady_ms: steadyMs === undefined ? undefined : Math.round(steadyMs),
      steady_from: windows[0]?.from,
      runs: c.results.map((r) => ({
        ms: Math.round(r.ms),
        steady_ms: r.steady ? Math.round(r.steady.ms) : undefined,
        steady_cpu_ms: r.steady?.cpuMs,
        ...r.details,
      })),
      ...(c.key === 'streams' ? { guarantee: 'exactly_once_v2', commit_interval_ms: 1000 } : {}),
      ...(c.key === 'ours' ? { backend: oursBackend, transactional: oursBackend === 'kafka', persist_every: '1s' } : {}),
    };
    rows.push({
      contestant: c.label,
      e2e_ms: Math.round(ms),
      e2e_records_per_s: e2e[c.key]!,
      steady_ms: steadyMs === undefined ? '-' : Math.round(steadyMs),
      steady_records_per_s: steady[c.key] ?? '-',
      cpu_us_per_record: cpuPerRecord[c.key] ?? '-',
      runs: c.results.length,
    });
  }
  const r3 = (v: number) => Number(v.toFixed(3));
  if (steady.ours !== undefined && steady.raw !== undefined) figures.fold_vs_raw = r3(ratio(steady.ours, steady.raw));
  if (steady.ours !== undefined && steady.streams !== undefined) figures.fold_vs_streams = r3(ratio(steady.ours, steady.streams));
  if (e2e.ours !== undefined && e2e.raw !== undefined) figures.fold_vs_raw_e2e = r3(ratio(e2e.ours, e2e.raw));
  if (e2e.ours !== undefined && e2e.streams !== undefined) figures.fold_vs_streams_e2e = r3(ratio(e2e.ours, e2e.streams));
  // CPU spent per record in the steady-state window (all the contestant's threads; raw: this
  // process, the committed-offset poller included): what a neighbour's load barely moves.
  if (cpuPerRecord.ours !== undefined && cpuPerRecord.raw !== undefined) figures.fold_vs_raw_cpu = r3(ratio(cpuPerRecord.raw, cpuPerRecord.ours));
  if (cpuPerRecord.ours !== undefined && cpuPerRecord.streams !== undefined) {
    figures.fold_vs_streams_cpu = r3(ratio(cpuPerRecord.streams, cpuPerRecord.ours));
  }
  // The committed offset behind the folded position while ours folds (first → last record folded):
  // how old the committed position is at each poll of the committed offsets, per partition.
  const oursRuns = contestants.find((c) => c.key === 'ours')?.results ?? [];
  const detail = (name: string) => oursRuns.flatMap((r) => (typeof r.details?.[name] === 'number' ? [r.details[name] as number] : []));
  for (const name of ['commit_lag_p99_ms', 'commit_lag_max_ms', 'commit_tail_ms']) {
    const values = detail(name);
    if (values.length > 0 && values.length === oursRuns.length) figures[name] = Math.round(median(values));
  }
  notes.commit_lag =
    'commit_lag_p99_ms: at each poll of the committed offsets (every 50 ms) while ours folds, per partition not yet at its end, how long ago the fold passed the committed offset (the bench flow logs its position every 20 ms); 99th percentile per run, median of runs. Goal: persistEvery (1 s) + 1 s';
  notes.ratios = 'fold_vs_raw and fold_vs_streams: steady-state rates (first record processed → committed end); *_e2e: from each contestant\'s start; *_cpu: their CPU µs per record in the steady window, inverted (theirs ÷ ours, so > 1 means ours is cheaper)';
  if (e2e.ours !== undefined && oursBackend === 'memory') {
    notes.ours_backend_caveat = "ours ran with the MEMORY backend (BENCH_BACKEND=memory): not the benchmark's subject, transactional Kafka persistence";
  }

  printTable(`throughput: ${RECORDS.toLocaleString('en-US')} records, ${KEYS.toLocaleString('en-US')} keys, ${PARTITIONS} partitions, median of ${RUNS}${isQuick() ? ' (quick)' : ''}`, rows);
  if (figures.fold_vs_raw !== undefined) {
    process.stdout.write(
      `steady state: fold_vs_raw = ${figures.fold_vs_raw} (goal >= 0.9), fold_vs_streams = ${figures.fold_vs_streams ?? 'n/a'} (goal >= 2)\n` +
        `end to end:   fold_vs_raw_e2e = ${figures.fold_vs_raw_e2e ?? 'n/a'}, fold_vs_streams_e2e = ${figures.fold_vs_streams_e2e ?? 'n/a'}\n`,
    );
  }
  if (figures.commit_lag_p99_ms !== undefined) {
    process.stdout.write(
      `commit lag:   commit_lag_p99_ms = ${figures.commit_lag_p99_ms} (goal <= persistEvery + 1 s = 2000), max ${figures.commit_lag_max_ms}, commit tail ${figures.commit_tail_ms} ms\n`,
    );
  }
  const file = writeResults('throughput', figures, { versions: { 'kafka-streams': STREAMS_VERSION }, notes });
  process.stdout.write(`results: ${file}\n`);
  return contestants.some((c) => c.error) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
