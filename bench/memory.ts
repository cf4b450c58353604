// Memory per live key (issue 8, item 6): resident memory that one PartitionFlow holds per 100,000
// live keys of a small state ({count, total}), folded from records of the shared throughput format
// (bench/lib/records.ts). Measured in a child process of its own (`node --expose-gc`), so nothing
// else lives in the heap: RSS and heap after gc() before the first record, and again after every
// key has been folded twice (not persisted: the keys are live and dirty, as between two persists).
// For scale, a second child measures the same keys in a plain Map<string, {count, total}> — the
// least any JavaScript process pays for them; rss_vs_plain_map is the engine's RSS over the Map's.
// `npm run bench:memory [-- --quick]`: 1,000,000 keys (quick: 100,000).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { isQuick, sized } from './lib/args';
import { startProgress } from './lib/progress';
import { type BenchRecordValue, recordKey, recordValue, type Totals } from './lib/records';
import { PACKAGE_ROOT, writeResults } from './lib/results';
import { printTable } from './lib/table';
import { createPartitionFlow } from '../flow/create-partition-flow';
import { defineFlow } from '../define-flow';
import { FlowMetrics } from '../flow/metrics';
import type { InputMessage } from '../flow/record';
import { InMemoryBackend } from '../persistence/memory';
import { Registry } from 'prom-client';

const KEYS = sized(1_000_000, 100_000);
/** Each key gets this many records, so every state has been updated, not only created. */
const PASSES = 2;
const BATCH = 1_000;
const MiB = 1024 * 1024;

type Mode = 'engine' | 'plain-map';

interface Sample {
  rss: number;
  heapUsed: number;
  external: number;
}

interface ChildResult {
  mode: Mode;
  keys: number;
  liveKeys: number;
  before: Sample;
  after: Sample;
  foldMs: number;
}

function sample(): Sample {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the child with node --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, external: m.external + m.arrayBuffers };
}

/** Messages for records from..to-1 of the shared format, as kafkajs hands them over. */
function batch(from: number, to: number, keys: number): InputMessage[] {
  const out: InputMessage[] = new Array(to - from);
  for (let i = from; i < to; i++) {
    out[i - from] = { offset: String(i), key: Buffer.from(recordKey(i, keys)), value: Buffer.from(recordValue(i)), timestamp: '1700000000000' };
  }
  return out;
}

async function child(mode: Mode, keys: number): Promise<ChildResult> {
  const records = keys * PASSES;
  const progress = startProgress(`${mode} ${keys.toLocaleString('en-US')} keys`, records, { plainEveryMs: 5_000 });
  const definition = defineFlow<Totals, BenchRecordValue>({
    name: 'bench-memory',
    groupId: 'bench-memory',
    topics: ['bench-memory'],
    fold: (state, record) => ({ count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + record.value.amount }),
    persistence: { backend: 'memory' },
    timers: { persistPeriodically: { persistEvery: '1s', fireEvery: '1s' } },
  });
  const tp = { topic: 'bench-memory', partition: 0 };
  const flow = createPartitionFlow(definition, {
    ...tp,
    assignedAt: '0',
    persistence: new InMemoryBackend<Totals, BenchRecordValue>().forPartition(tp, 'snapshots', 256),
    metrics: FlowMetrics.of(new Registry()),
  });
  await flow.recover();
  const plain = new Map<string, Totals>();
  const before = sample();

  const start = process.hrtime.bigint();
  for (let from = 0, n = 0; from < records; from += BATCH, n++) {
    const messages = batch(from, Math.min(from + BATCH, records), keys);
    if (mode === 'engine') {
      const r = flow.handleBatch(messages);
      if (r) await r;
      // The worker triggers key timers about once a second; here every 100 batches.
      if (n % 100 === 99) flow.triggerTimers();
    } else {
      for (const m of messages) {
        const key = (m.key as Buffer).toString('utf8');
        const value = JSON.parse(m.value!.toString('utf8')) as BenchRecordValue;
        const state = plain.get(key);
        plain.set(key, { count: (state?.count ?? 0) + 1, total: (state?.total ?? 0) + value.amount });
      }
    }
    progress.tick(messages.length);
  }
  const foldMs = Number(process.hrtime.bigint() - start) / 1e6;
  progress.stop();

  const after = sample();
  const liveKeys = mode === 'engine' ? flow.liveKeys : plain.size;
  if (liveKeys !== keys) throw new Error(`${mode}: ${liveKeys} live keys, expected ${keys}`);
  const k0 = recordKey(0, keys);
  const state = mode === 'engine' ? flow.stateOf(k0) : plain.get(k0);
  if (state?.count !== PASSES) throw new Error(`${mode}: key ${k0} has ${JSON.stringify(state)}, expected count ${PASSES}`);
  return { mode, keys, liveKeys, before, after, foldMs };
}

function runChild(mode: Mode, keys: number): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      ['--expose-gc', path.join(PACKAGE_ROOT, 'bin', 'run-ts.js'), __filename, '--child', mode, String(keys)],
      { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: process.env },
    );
    let result: ChildResult | undefined;
    const timer = setTimeout(() => proc.kill('SIGKILL'), 600_000);
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (line.startsWith('RESULT ')) result = JSON.parse(line.slice('RESULT '.length)) as ChildResult;
      else process.stdout.write(`${line}\n`);
    });
    proc.once('error', reject);
    proc.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 && result) resolve(result);
      else reject(new Error(`the ${mode} child failed (${signal ?? `exit ${code}`})`));
    });
  });
}

const per100k = (bytes: number, keys: number) => Number(((bytes / keys) * 100_000 / MiB).toFixed(2));

async function main(): Promise<void> {
  const engine = await runChild('engine', KEYS);
  const plain = await runChild('plain-map', KEYS);
  const figures = {
    rss_mb_per_100k_keys: per100k(engine.after.rss - engine.before.rss, KEYS),
    heap_mb_per_100k_keys: per100k(engine.after.heapUsed - engine.before.heapUsed, KEYS),
    bytes_per_key_heap: Math.round((engine.after.heapUsed - engine.before.heapUsed) / KEYS),
    plain_map_rss_mb_per_100k_keys: per100k(plain.after.rss - plain.before.rss, KEYS),
    plain_map_heap_mb_per_100k_keys: per100k(plain.after.heapUsed - plain.before.heapUsed, KEYS),
    // The goal (issue 14): at most 2x what a plain Map of the same states costs.
    rss_vs_plain_map: Number(((engine.after.rss - engine.before.rss) / (plain.after.rss - plain.before.rss)).toFixed(2)),
  };
  printTable(`memory: ${KEYS.toLocaleString('en-US')} live keys of {count, total}, ${PASSES} records each`, [
    { holder: 'PartitionFlow (engine)', rss_mb_per_100k_keys: figures.rss_mb_per_100k_keys, heap_mb_per_100k_keys: figures.heap_mb_per_100k_keys },
    { holder: 'plain Map', rss_mb_per_100k_keys: figures.plain_map_rss_mb_per_100k_keys, heap_mb_per_100k_keys: figures.plain_map_heap_mb_per_100k_keys },
  ]);
  process.stdout.write(`rss_vs_plain_map = ${figures.rss_vs_plain_map} (goal <= 2)\n`);
  const mb = (s: Sample) => ({ rss_mb: Math.round(s.rss / MiB), heap_used_mb: Math.round(s.heapUsed / MiB), external_mb: Math.round(s.external / MiB) });
  const file = writeResults('memory', figures, {
    notes: {
      keys: KEYS,
      records_per_key: PASSES,
      state: '{count, total} (two numbers)',
      key: 'k<i> strings (2-8 chars)',
      measured: 'child process with --expose-gc: gc() x3, then process.memoryUsage(); after minus before; keys folded, not persisted (dirty)',
      engine: { before: mb(engine.before), after: mb(engine.after), fold_ms: Math.round(engine.foldMs) },
      plain_map: { before: mb(plain.before), after: mb(plain.after), fold_ms: Math.round(plain.foldMs) },
      quick: isQuick(),
    },
  });
  process.stdout.write(`results: ${file}\n`);
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) {
  const mode = process.argv[childAt + 1] as Mode;
  const keys = Number(process.argv[childAt + 2]);
  child(mode, keys).then(
    (r) => process.stdout.write(`RESULT ${JSON.stringify(r)}\n`),
    (err) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exitCode = 1;
    },
  );
} else {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
