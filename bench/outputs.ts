// What exactly-once outputs cost (issue 15): the same flow on the real broker with transactional
// Kafka persistence (bench/flows/totals.ts: running totals per key, persistEvery 1 s, outputEvery
// at its default 1 s), run side by side in one process run on one freshly produced topic
// (6 partitions, 1,000,000 small JSON records over 2,000 keys; --quick: 50,000 over 500):
//   none    the fold emits nothing (no outputTopics);
//   every   the fold emits one record per input record (`{key, n, count, total}`, keyed by the
//           input key) — the demanding case, and the figure;
//   sparse  the fold emits on every 100th record (1 %): an alerting flow.
// Each is one worker process timed like bench:throughput's "ours" (bench/lib/ours.ts), to the
// moment its group's committed offsets equal the input's end offsets — by then every output must
// have landed, since a key with pending outputs holds the committed offset until its outputs went
// out in its snapshot transaction. Right then the output topic is read back read_committed and each
// expected output must be there exactly once (the run fails otherwise): the figure is only quoted
// for a run that delivered. Configurations are interleaved (none, every, sparse, none, …) and each
// figure is the median of the runs.
// Beside them, the same input through kafkajs's own EOS consume-transform-produce loop (raw_none,
// raw_every: bench/lib/raw-transform.ts) and through Kafka Streams EOS v2 with an output per record
// (streams_every: bench/anchors/kafka-streams TotalsApp with an output topic), outputs read back too.
// Figures (issue 33): outputs_vs_streams = Kafka Streams' steady-state time ÷ ours, an output per
// record each (goal ≥ 2); outputs_vs_kafkajs_eos = ours ÷ kafkajs's loop (goal ≤ 1.0).
// Kept, retired as a goal: outputs_vs_no_outputs = steady-state time with an output per record ÷ without
// (steady state = first record folded → committed end, as bench:throughput's fold_vs_*);
// outputs_sparse_vs_no_outputs the same at 1 %; *_e2e from the worker's spawn; *_cpu the
// worker's CPU per record with outputs ÷ without (what a neighbour's load barely moves).
// `npm run bench:outputs [-- --quick]`; BENCH_RUNS=n sets the runs per configuration (full 3, quick 1),
// BENCH_ONLY=every (or none,sparse,…) runs only those, BENCH_WORKER_LOG / BENCH_CPU_PROF as for
// bench:throughput (the worker's log lines, its V8 CPU profiles).
import { OUTPUT_SOURCE_HEADER } from '../flow/emit';
import { createKafkaClient, PartitionReader } from '../kafka';
import { brokersFromEnv } from '../config/env';
import { isQuick, sized } from './lib/args';
import { runOurs } from './lib/ours';
import { rawKafkajsTransform } from './lib/raw-transform';
import { runKafkaStreams, STREAMS_VERSION } from './lib/anchors';
import type { ContestantResult } from './lib/raw';
import { createTopic, deleteTopics, produceRecords, uniqueName } from './lib/records';
import { writeResults } from './lib/results';
import { printTable, type Row } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import { timedRun } from './lib/timed-run';
import { localBrokerPid, processCpuMs } from './lib/cpu';
import { PACKAGE_ROOT } from './lib/results';
import { freePort } from '../workers/observability/metrics-server';

const PARTITIONS = 6;
// 1,000,000 records, as bench:throughput (200,000 until 2026-12-02: the run without outputs then
// lasted ≈ 1 s, and two back-to-back full runs of the same code on a quiet machine gave 1.84 and
// 2.94); BENCH_RECORDS and BENCH_KEYS set other sizes.
const RECORDS = Number(process.env.BENCH_RECORDS ?? sized(1_000_000, 50_000));
const KEYS = Number(process.env.BENCH_KEYS ?? sized(2_000, 500));
const RUNS = Number(process.env.BENCH_RUNS ?? sized(3, 1));
const SETTLE_MS = 2_000;
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

interface Config {
  key: 'none' | 'every' | 'sparse' | 'raw_none' | 'raw_every' | 'streams_every';
  label: string;
  /** Emit on records whose index is a multiple of this; undefined: no outputs. */
  every?: number;
  /** kafkajs's own consume-transform-produce loop (bench/lib/raw-transform.ts), not a worker. */
  raw?: boolean;
  /** The Kafka Streams anchor (TotalsApp with an output topic), not a worker. */
  streams?: boolean;
  results: ContestantResult[];
  error?: string;
}

/**
 * The local broker's CPU sampled every 50 ms (its /proc ticks: 10 ms resolution) while a run goes
 * on, so its CPU over the run's steady window can be read afterwards — without the worker's
 * start-up and without the read-back of the outputs (which timedRun's whole-run figure includes
 * for our worker, not for kafkajs's loop).
 */
class BrokerCpuSampler {
  private readonly pid = localBrokerPid(PACKAGE_ROOT);
  private readonly samples: Array<readonly [number, number]> = [];
  private timer: NodeJS.Timeout | undefined;
  readonly startedAt = performance.now();

  constructor() {
    if (this.pid === undefined) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), 50);
  }

  private sample(): void {
    const cpu = processCpuMs(this.pid);
    if (cpu !== undefined) this.samples.push([performance.now(), cpu]);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.sample();
  }

  /** The broker's CPU ms between two moments (performance.now()), interpolated between samples. */
  between(from: number, to: number): number | undefined {
    const a = this.at(from);
    const b = this.at(to);
    return a === undefined || b === undefined ? undefined : b - a;
  }

  private at(t: number): number | undefined {
    const s = this.samples;
    if (s.length < 2 || t < s[0]![0] || t > s[s.length - 1]![0]) return undefined;
    let i = 1;
    while (s[i]![0] < t) i++;
    const [t0, c0] = s[i - 1]!;
    const [t1, c1] = s[i]!;
    return t1 === t0 ? c1 : c0 + ((c1 - c0) * (t - t0)) / (t1 - t0);
  }
}

/**
 * Runs `run` with the broker's CPU sampled, and adds to the result the broker's CPU over its steady
 * window (`broker_steady_cpu_ms`): the window ends `ms` after the run started (its finishing line)
 * and lasts `steady.ms`.
 */
async function withBrokerCpu(run: () => Promise<ContestantResult>): Promise<ContestantResult> {
  const sampler = new BrokerCpuSampler();
  try {
    const result = await run();
    sampler.stop();
    if (result.steady) {
      const end = sampler.startedAt + result.ms;
      const cpu = sampler.between(end - result.steady.ms, end);
      if (cpu !== undefined) result.details = { ...result.details, broker_steady_cpu_ms: Math.round(cpu) };
    }
    return result;
  } finally {
    sampler.stop();
  }
}

/**
 * What the worker did by its finishing line, from its /metrics: snapshot transactions committed,
 * snapshot records landed, persists by reason — how often the keys were written, which is what
 * costs the broker most (a transaction's coordinator requests and markers, not its records).
 */
async function workerWrites(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const sum = (name: string, filter?: RegExp) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) && (!filter || filter.test(l)))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const out: Record<string, number> = {
    transactions: sum('kafka_flow_snapshot_transactions_total', /outcome="committed"/),
    snapshot_records: sum('kafka_flow_snapshot_records_total'),
  };
  for (const reason of ['periodic', 'outputs', 'idle']) out[`persists_${reason}`] = sum('kafka_flow_persists_total', new RegExp(`reason="${reason}"`));
  return out;
}

/** How many of the records 0..RECORDS-1 emit when every `every`-th does. */
const expectedOutputs = (every: number) => Math.ceil(RECORDS / every);

/**
 * Reads the output topic read_committed (the project's group-less reader) and checks that the
 * outputs are exactly the expected ones: each index n with n % every === 0 once, each carrying
 * the kafka-flow-source header. Throws otherwise.
 */
async function checkOutputs(outputTopic: string, every: number, sourceHeader = true): Promise<Record<string, unknown>> {
  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: 'bench-outputs-check', logLevel: 'error' });
  const reader = new PartitionReader(client);
  const seen = new Uint8Array(RECORDS);
  let read = 0;
  let duplicated = 0;
  let unexpected = 0;
  let withoutHeader = 0;
  const started = Date.now();
  try {
    await reader.readTopic(outputTopic, PARTITIONS, (r) => {
      read++;
      if (sourceHeader && r.headers[OUTPUT_SOURCE_HEADER] === undefined) withoutHeader++;
      const n = (JSON.parse(String(r.value)) as { n: number }).n;
      if (!Number.isInteger(n) || n < 0 || n >= RECORDS || n % every !== 0) unexpected++;
      else if (seen[n] === 1) duplicated++;
      else seen[n] = 1;
    });
  } finally {
    await reader.close().catch(() => undefined);
  }
  const expected = expectedOutputs(every);
  const distinct = read - duplicated - unexpected;
  const missing = expected - distinct;
  if (missing !== 0 || duplicated !== 0 || unexpected !== 0 || withoutHeader !== 0) {
    throw new Error(
      `${outputTopic}: ${read} outputs read (read_committed), expected ${expected} exactly once: ${missing} missing, ${duplicated} duplicated, ${unexpected} unexpected, ${withoutHeader} without the ${OUTPUT_SOURCE_HEADER} header`,
    );
  }
  return { outputs_read: read, outputs_read_ms: Date.now() - started };
}

async function main(): Promise<number> {
  if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`BENCH_RUNS=${process.env.BENCH_RUNS}: a positive integer please`);
  if (!Number.isInteger(RECORDS) || RECORDS < 1 || !Number.isInteger(KEYS) || KEYS < 1) throw new Error('BENCH_RECORDS and BENCH_KEYS: positive integers please');
  const topic = uniqueName('bench-outputs');
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const configs = (
    [
      { key: 'none', label: 'no outputs', results: [] },
      { key: 'every', label: 'an output per record', every: 1, results: [] },
      { key: 'sparse', label: 'an output per 100 records', every: 100, results: [] },
      { key: 'raw_none', label: 'raw kafkajs EOS loop, offsets only', raw: true, results: [] },
      { key: 'raw_every', label: 'raw kafkajs EOS loop, an output per record', raw: true, every: 1, results: [] },
      { key: 'streams_every', label: `Kafka Streams ${STREAMS_VERSION} EOS v2 (commit 1 s), an output per record`, streams: true, every: 1, results: [] },
    ] satisfies Config[] as Config[]
  ).filter((c) => !only || only.includes(c.key));
  const notes: Record<string, unknown> = {
    topic_partitions: PARTITIONS,
    records: RECORDS,
    keys: KEYS,
    runs: RUNS,
    flow: 'bench/flows/totals.ts: running totals per key, transactional Kafka persistence, persistEvery 1 s, outputEvery 1 s (default), maxWritesPerTransaction 2,048 (default)',
    output: 'value {"key","n","count","total"} as JSON (≈ 50 bytes), keyed by the input key, to a topic with the input\'s 6 partitions',
    finishing_line: "from the worker's first record folded (steady) or its spawn (e2e) until its group's committed offsets equal the end offsets on all partitions; median of the runs",
    ...(only ? { only } : {}),
    check: 'at the finishing line the output topic is read back read_committed: every expected output exactly once with its kafka-flow-source header, or the run fails',
  };
  try {
    process.stdout.write(`producing ${RECORDS.toLocaleString('en-US')} records over ${KEYS.toLocaleString('en-US')} keys to ${topic} (${PARTITIONS} partitions)\n`);
    await produceRecords({ topic, partitions: PARTITIONS, records: RECORDS, keys: KEYS });
    for (let run = 1; run <= RUNS; run++) {
      for (const c of configs) {
        if (c.error) continue;
        process.stdout.write(`run ${run}/${RUNS}: ${c.label}\n`);
        const every = c.every;
        if (c.raw) {
          const outputTopic = every === undefined ? undefined : uniqueName('bench-raw-outputs');
          try {
            await timedRun(c, () => withBrokerCpu(() => rawKafkajsTransform({ topic, outputTopic, outputPartitions: PARTITIONS, label: c.label })));
            if (outputTopic && c.results.length > 0) c.results[c.results.length - 1]!.details!.check = await checkOutputs(outputTopic, 1, false);
          } finally {
            if (outputTopic) await deleteTopics([outputTopic]);
          }
          await settle();
          continue;
        }
        if (c.streams) {
          const outputTopic = uniqueName('bench-streams-outputs');
          try {
            await createTopic(outputTopic, PARTITIONS);
            await timedRun(c, () => withBrokerCpu(() => runKafkaStreams({ topic, partitions: PARTITIONS, outputTopic })));
            if (c.results.length > 0) c.results[c.results.length - 1]!.details!.check = await checkOutputs(outputTopic, 1, false);
          } finally {
            await deleteTopics([outputTopic]);
          }
          await settle();
          continue;
        }
        const metricsPort = await freePort();
        await timedRun(c, () =>
          withBrokerCpu(() => runOurs(topic, {
              backend: 'kafka',
              label: `ours (${c.label})`,
              env: (flow) => ({
                KFT_METRICS_PORT: String(metricsPort),
                ...(every === undefined ? {} : { BENCH_OUTPUT_TOPIC: `${flow}-outputs`, BENCH_OUTPUT_EVERY: String(every) }),
              }),
              check: async (flow) => {
                // Read first: at the finishing line, before the read-back.
                const writes = await workerWrites(metricsPort).catch((err: Error) => ({ metrics_error: err.message }));
                return { ...writes, ...(every === undefined ? {} : await checkOutputs(`${flow}-outputs`, every)) };
              },
            })),
        );
        await settle();
      }
    }
  } finally {
    await deleteTopics([topic]);
  }

  const figures: Record<string, number> = {};
  const steady: Partial<Record<Config['key'], number>> = {};
  const e2e: Partial<Record<Config['key'], number>> = {};
  const cpu: Partial<Record<Config['key'], number>> = {};
  const rows: Row[] = [];
  for (const c of configs) {
    if (c.error) notes[`${c.key}_error`] = c.error;
    if (c.results.length === 0) continue;
    e2e[c.key] = median(c.results.map((r) => r.ms));
    const windows = c.results.flatMap((r) => (r.steady && r.steady.ms > 0 ? [r.steady] : []));
    if (windows.length === c.results.length) steady[c.key] = median(windows.map((w) => w.ms));
    const cpus = windows.flatMap((w) => (w.cpuMs !== undefined ? [(w.cpuMs * 1000) / w.records] : []));
    if (cpus.length === c.results.length) cpu[c.key] = median(cpus);
    if (steady[c.key] !== undefined) figures[`${c.key}_steady_records_per_s`] = Math.round(perSecond(RECORDS, steady[c.key]!));
    if (cpu[c.key] !== undefined) figures[`${c.key}_cpu_us_per_record`] = Number(cpu[c.key]!.toFixed(2));
    // The broker's CPU over the whole run (fetches served, transactions, outputs appended; for our
    // worker also its start-up and the read-back of the outputs), per input record.
    const brokerCpus = c.results.flatMap((r) => (typeof r.details?.broker_cpu_ms === 'number' ? [(r.details.broker_cpu_ms * 1000) / r.records] : []));
    if (brokerCpus.length === c.results.length) figures[`${c.key}_broker_cpu_us_per_record`] = Number(median(brokerCpus).toFixed(2));
    // The same over the steady window only (the worker's start-up and the read-back left out).
    const brokerSteady = c.results.flatMap((r) => (typeof r.details?.broker_steady_cpu_ms === 'number' ? [(r.details.broker_steady_cpu_ms * 1000) / r.records] : []));
    if (brokerSteady.length === c.results.length) figures[`${c.key}_broker_steady_cpu_us_per_record`] = Number(median(brokerSteady).toFixed(2));
    notes[c.key] = {
      label: c.label,
      outputs_per_run: c.every === undefined ? 0 : expectedOutputs(c.every),
      runs: c.results.map((r) => ({ ms: Math.round(r.ms), steady_ms: r.steady ? Math.round(r.steady.ms) : undefined, steady_cpu_ms: r.steady?.cpuMs, ...r.details })),
    };
    rows.push({
      configuration: c.label,
      outputs: c.every === undefined ? 0 : expectedOutputs(c.every),
      steady_ms: steady[c.key] === undefined ? '-' : Math.round(steady[c.key]!),
      steady_records_per_s: figures[`${c.key}_steady_records_per_s`] ?? '-',
      e2e_ms: Math.round(e2e[c.key]!),
      cpu_us_per_record: cpu[c.key] === undefined ? '-' : Number(cpu[c.key]!.toFixed(2)),
      broker_steady_cpu_us: figures[`${c.key}_broker_steady_cpu_us_per_record`] ?? '-',
      runs: c.results.length,
    });
  }
  const r3 = (v: number) => Number(v.toFixed(3));
  // Time ratios (with ÷ without), so the goal reads ≤ 1.3: the same records take at most 30 % longer.
  if (steady.every !== undefined && steady.none !== undefined) figures.outputs_vs_no_outputs = r3(ratio(steady.every, steady.none));
  if (steady.sparse !== undefined && steady.none !== undefined) figures.outputs_sparse_vs_no_outputs = r3(ratio(steady.sparse, steady.none));
  if (e2e.every !== undefined && e2e.none !== undefined) figures.outputs_vs_no_outputs_e2e = r3(ratio(e2e.every, e2e.none));
  if (e2e.sparse !== undefined && e2e.none !== undefined) figures.outputs_sparse_vs_no_outputs_e2e = r3(ratio(e2e.sparse, e2e.none));
  if (cpu.every !== undefined && cpu.none !== undefined) figures.outputs_vs_no_outputs_cpu = r3(ratio(cpu.every, cpu.none));
  if (cpu.sparse !== undefined && cpu.none !== undefined) figures.outputs_sparse_vs_no_outputs_cpu = r3(ratio(cpu.sparse, cpu.none));
  // The floor kafkajs itself sets: its own EOS loop with an output per record ÷ the same loop without.
  if (steady.raw_every !== undefined && steady.raw_none !== undefined) figures.raw_outputs_vs_no_outputs = r3(ratio(steady.raw_every, steady.raw_none));
  if (cpu.raw_every !== undefined && cpu.raw_none !== undefined) figures.raw_outputs_vs_no_outputs_cpu = r3(ratio(cpu.raw_every, cpu.raw_none));
  if (steady.every !== undefined && steady.raw_every !== undefined) {
    figures.outputs_vs_raw_outputs = r3(ratio(steady.every, steady.raw_every));
    // Issue 33's name for it: ours ÷ kafkajs's own EOS consume-transform-produce loop (goal ≤ 1.0).
    figures.outputs_vs_kafkajs_eos = figures.outputs_vs_raw_outputs;
  }
  // Kafka Streams EOS v2 doing the same (an output per record) ÷ ours: ≥ 2 means ours takes half the time.
  if (steady.every !== undefined && steady.streams_every !== undefined) figures.outputs_vs_streams = r3(ratio(steady.streams_every, steady.every));
  if (cpu.every !== undefined && cpu.streams_every !== undefined) figures.outputs_vs_streams_cpu = r3(ratio(cpu.streams_every, cpu.every));
  notes.ratios =
    'time with outputs ÷ time without on the same input in the same run (so ≤ 1.3 is the goal): outputs_vs_no_outputs (an output per record) and outputs_sparse_vs_no_outputs (per 100 records) over the steady-state window; *_e2e from the worker\'s spawn; *_cpu: the worker\'s CPU µs per record in the steady window, with ÷ without. raw_outputs_vs_no_outputs: the same ratio for kafkajs\'s own EOS consume-transform-produce loop (bench/lib/raw-transform.ts: a transaction per batch carrying its outputs and offset ÷ offset only) — the floor the client library sets; outputs_vs_raw_outputs: ours with an output per record ÷ that loop with one (also as outputs_vs_kafkajs_eos, issue 33\'s name; goal ≤ 1.0). outputs_vs_streams: Kafka Streams EOS v2 (bench/anchors/kafka-streams TotalsApp with an output topic: the same totals per key, each record\'s new totals as one output, record cache off, commit 1 s, 1 stream thread) ÷ ours with an output per record, steady-state time (goal ≥ 2); *_cpu: its CPU per record ÷ ours';

  printTable(`outputs: ${RECORDS.toLocaleString('en-US')} records, ${KEYS.toLocaleString('en-US')} keys, ${PARTITIONS} partitions, transactional Kafka persistence, median of ${RUNS}${isQuick() ? ' (quick)' : ''}`, rows);
  if (figures.outputs_vs_no_outputs !== undefined) {
    process.stdout.write(
      `outputs_vs_no_outputs = ${figures.outputs_vs_no_outputs} (goal <= 1.3; e2e ${figures.outputs_vs_no_outputs_e2e}, cpu ${figures.outputs_vs_no_outputs_cpu ?? 'n/a'}), ` +
        `sparse (1 %) = ${figures.outputs_sparse_vs_no_outputs ?? 'n/a'}\n`,
    );
  }
  if (figures.raw_outputs_vs_no_outputs !== undefined) {
    process.stdout.write(
      `raw kafkajs EOS loop: raw_outputs_vs_no_outputs = ${figures.raw_outputs_vs_no_outputs} (cpu ${figures.raw_outputs_vs_no_outputs_cpu ?? 'n/a'}); ours with outputs ÷ raw with outputs = outputs_vs_kafkajs_eos = ${figures.outputs_vs_raw_outputs ?? 'n/a'} (goal <= 1.0)\n`,
    );
  }
  if (figures.outputs_vs_streams !== undefined) {
    process.stdout.write(`Kafka Streams EOS v2 with an output per record ÷ ours: outputs_vs_streams = ${figures.outputs_vs_streams} (goal >= 2; cpu ${figures.outputs_vs_streams_cpu ?? 'n/a'})\n`);
  }
  const file = writeResults('outputs', figures, { versions: { 'kafka-streams': STREAMS_VERSION }, notes });
  process.stdout.write(`results: ${file}\n`);
  return configs.some((c) => c.error) ? 1 : 0;
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
