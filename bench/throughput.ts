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
// BENCH_OURS=skip leaves it out.
import { isQuick, sized } from './lib/args';
import { runKafkaStreams, STREAMS_VERSION } from './lib/anchors';
import { runOurs } from './lib/ours';
import { type ContestantResult, rawKafkajsConsume } from './lib/raw';
import { deleteTopics, produceRecords, uniqueName } from './lib/records';
import { writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { perSecond, ratio } from './lib/timing';

const PARTITIONS = 6;
const RECORDS = sized(1_000_000, 100_000);
const KEYS = sized(10_000, 1_000);
/** A pause between contestants, so one's cleanup (group leave, topic deletion) is not in the next one's figure. */
const SETTLE_MS = 2_000;

const rate = (r: ContestantResult) => Math.round(perSecond(r.records, r.ms));
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

async function main(): Promise<number> {
  const topic = uniqueName('bench-throughput');
  const figures: Record<string, number> = {};
  const notes: Record<string, unknown> = {
    topic_partitions: PARTITIONS,
    records: RECORDS,
    keys: KEYS,
    record: 'key "k<i % keys>", value {"n":i,"amount":i % 100} (bench/lib/records.ts)',
    finishing_line: "from the contestant's start until its group's committed offsets equal the end offsets on all partitions",
  };
  const rows: Row[] = [];
  let oursFailed = false;
  try {
    process.stdout.write(`producing ${RECORDS.toLocaleString('en-US')} records over ${KEYS.toLocaleString('en-US')} keys to ${topic} (${PARTITIONS} partitions)\n`);
    const produced = await produceRecords({ topic, partitions: PARTITIONS, records: RECORDS, keys: KEYS });
    notes.produce_records_per_s = Math.round(perSecond(RECORDS, produced.ms));

    const raw = await rawKafkajsConsume({ topic });
    figures.raw_records_per_s = rate(raw);
    notes.raw = { ms: Math.round(raw.ms), ...raw.details };
    rows.push({ contestant: 'raw kafkajs eachBatch + JSON.parse', ms: Math.round(raw.ms), records_per_s: figures.raw_records_per_s });
    await settle();

    const streams = await runKafkaStreams({ topic, partitions: PARTITIONS });
    figures.streams_records_per_s = rate(streams);
    notes.streams = { ms: Math.round(streams.ms), guarantee: 'exactly_once_v2', commit_interval_ms: 1000, ...streams.details };
    rows.push({ contestant: `Kafka Streams ${STREAMS_VERSION} (EOS v2, commit 1 s)`, ms: Math.round(streams.ms), records_per_s: figures.streams_records_per_s });

    // ---- HOOK for the lead: this project's figures. ----------------------------------------------
    // runOurs spawns `kafka-flow-temporal worker bench/flows/totals.ts` (transactional Kafka
    // persistence, persistEvery 1 s) and times it to the same finishing line. Until workers have the
    // Kafka backend, BENCH_BACKEND=memory measures the same path with in-process persistence.
    if (process.env.BENCH_OURS !== 'skip') {
      await settle();
      try {
        const ours = await runOurs(topic);
        figures.ours_records_per_s = rate(ours);
        figures.fold_vs_raw = Number(ratio(figures.ours_records_per_s, figures.raw_records_per_s).toFixed(3));
        figures.fold_vs_streams = Number(ratio(figures.ours_records_per_s, figures.streams_records_per_s).toFixed(3));
        notes.ours = { ms: Math.round(ours.ms), persist_every: '1s', ...ours.details };
        if (ours.details?.backend === 'memory') {
          notes.ours_backend_caveat = "ours ran with the MEMORY backend (no Kafka backend in workers yet): not the benchmark's subject, transactional Kafka persistence";
        }
        rows.push({ contestant: `ours, one worker (${String(ours.details?.backend)} persistence, 1 s)`, ms: Math.round(ours.ms), records_per_s: figures.ours_records_per_s });
      } catch (err) {
        oursFailed = true;
        notes.ours_error = (err as Error).message.split('\n').slice(0, 3).join(' | ');
        process.stderr.write(`ours failed: ${(err as Error).message}\n`);
      }
    } else {
      notes.ours = 'skipped (BENCH_OURS=skip)';
    }
    // -------------------------------------------------------------------------------------------------
  } finally {
    await deleteTopics([topic]);
  }

  printTable(`throughput: ${RECORDS.toLocaleString('en-US')} records, ${KEYS.toLocaleString('en-US')} keys, ${PARTITIONS} partitions${isQuick() ? ' (quick)' : ''}`, rows);
  if (figures.fold_vs_raw !== undefined) {
    process.stdout.write(`fold_vs_raw = ${figures.fold_vs_raw} (goal >= 0.9), fold_vs_streams = ${figures.fold_vs_streams} (goal > 1)\n`);
  }
  const file = writeResults('throughput', figures, { versions: { 'kafka-streams': STREAMS_VERSION }, notes });
  process.stdout.write(`results: ${file}\n`);
  return oursFailed ? 1 : 0;
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
