// Throughput side by side (issue 8, items 1 and 2): one freshly produced topic (6 partitions,
// 1,000,000 small JSON records over 10,000 keys; --quick: 100,000 over 1,000), consumed in turn by
//   raw     a plain kafkajs eachBatch consumer that JSON-parses every value (bench/lib/raw.ts),
//   streams the same running-totals aggregation as a Kafka Streams app, exactly-once v2, commit
//           interval 1 s (bench/anchors/kafka-streams/, bench/lib/anchors.ts),
//   ours    one worker of this project folding running totals, transactional Kafka persistence
//           every 1 s (bench/flows/totals.ts, bench/lib/ours.ts).
// Every contestant is timed the same way: from its start (consumer created, JVM or worker spawned)
// until its group's committed offsets equal the end offsets on all partitions.
// `npm run bench:throughput [-- --quick]`; BENCH_BACKEND=memory runs ours with the memory backend,
// BENCH_OURS=skip leaves it out, BENCH_RUNS=n sets the runs per contestant (full 3, quick 1).
import { isQuick, sized } from './lib/args';
import { runKafkaStreams, STREAMS_VERSION } from './lib/anchors';
import { runOurs } from './lib/ours';
import { type ContestantResult, rawKafkajsConsume } from './lib/raw';
import { deleteTopics, produceRecords, uniqueName } from './lib/records';
import { writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';

const PARTITIONS = 6;
const RECORDS = sized(1_000_000, 100_000);
const KEYS = sized(10_000, 1_000);
/** A pause between contestants, so one's cleanup (group leave, topic deletion) is not in the next one's figure. */
const SETTLE_MS = 2_000;

/** Runs per contestant (interleaved: raw, streams, ours, raw, …); figures are the medians. BENCH_RUNS overrides. */
const RUNS = Number(process.env.BENCH_RUNS ?? sized(3, 1));

const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

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
  const oursBackend = process.env.BENCH_BACKEND === 'memory' ? 'memory' : 'kafka';
  const contestants: Contestant[] = [
    { key: 'raw', label: 'raw kafkajs eachBatch + JSON.parse', run: () => rawKafkajsConsume({ topic }), results: [] },
    { key: 'streams', label: `Kafka Streams ${STREAMS_VERSION} (EOS v2, commit 1 s)`, run: () => runKafkaStreams({ topic, partitions: PARTITIONS }), results: [] },
    // ---- HOOK for the lead: this project's contestant. --------------------------------------------
    // runOurs spawns `kafka-flow-temporal worker bench/flows/totals.ts` (transactional Kafka
    // persistence, persistEvery 1 s) and times it to the same finishing line. Until workers have the
    // Kafka backend, BENCH_BACKEND=memory measures the same path with in-process persistence.
    { key: 'ours', label: `ours, one worker (${oursBackend} persistence, 1 s)`, run: () => runOurs(topic, { backend: oursBackend }), results: [] },
  ].filter((c) => c.key !== 'ours' || process.env.BENCH_OURS !== 'skip') as Contestant[];
  if (process.env.BENCH_OURS === 'skip') notes.ours = 'skipped (BENCH_OURS=skip)';

  try {
    process.stdout.write(`producing ${RECORDS.toLocaleString('en-US')} records over ${KEYS.toLocaleString('en-US')} keys to ${topic} (${PARTITIONS} partitions)\n`);
    const produced = await produceRecords({ topic, partitions: PARTITIONS, records: RECORDS, keys: KEYS });
    notes.produce_records_per_s = Math.round(perSecond(RECORDS, produced.ms));
    for (let run = 1; run <= RUNS; run++) {
      for (const c of contestants) {
        if (c.error) continue;
        if (RUNS > 1) process.stdout.write(`run ${run}/${RUNS}: ${c.label}\n`);
        try {
          c.results.push(await c.run());
        } catch (err) {
          c.error = (err as Error).message.split('\n').slice(0, 3).join(' | ');
          process.stderr.write(`${c.key} failed: ${(err as Error).message}\n`);
        }
        await settle();
      }
    }
  } finally {
    await deleteTopics([topic]);
  }

  const rows: Row[] = [];
  const rates: Partial<Record<Contestant['key'], number>> = {};
  for (const c of contestants) {
    if (c.error) notes[`${c.key}_error`] = c.error;
    if (c.results.length === 0) continue;
    const ms = median(c.results.map((r) => r.ms));
    rates[c.key] = Math.round(perSecond(c.results[0]!.records, ms));
    figures[`${c.key}_records_per_s`] = rates[c.key]!;
    notes[c.key] = {
      median_ms: Math.round(ms),
      runs: c.results.map((r) => ({ ms: Math.round(r.ms), ...r.details })),
      ...(c.key === 'streams' ? { guarantee: 'exactly_once_v2', commit_interval_ms: 1000 } : {}),
      ...(c.key === 'ours' ? { backend: oursBackend, persist_every: '1s' } : {}),
    };
    rows.push({ contestant: c.label, median_ms: Math.round(ms), records_per_s: rates[c.key]!, runs: c.results.length });
  }
  if (rates.ours !== undefined && rates.raw !== undefined) figures.fold_vs_raw = Number(ratio(rates.ours, rates.raw).toFixed(3));
  if (rates.ours !== undefined && rates.streams !== undefined) figures.fold_vs_streams = Number(ratio(rates.ours, rates.streams).toFixed(3));
  if (rates.ours !== undefined && oursBackend === 'memory') {
    notes.ours_backend_caveat =
      "ours ran with the MEMORY backend (no Kafka backend in workers yet): not the benchmark's subject, transactional Kafka persistence";
  }

  printTable(`throughput: ${RECORDS.toLocaleString('en-US')} records, ${KEYS.toLocaleString('en-US')} keys, ${PARTITIONS} partitions, median of ${RUNS}${isQuick() ? ' (quick)' : ''}`, rows);
  if (figures.fold_vs_raw !== undefined) {
    process.stdout.write(`fold_vs_raw = ${figures.fold_vs_raw} (goal >= 0.9), fold_vs_streams = ${figures.fold_vs_streams ?? 'n/a'} (goal > 1)\n`);
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
