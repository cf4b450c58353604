// Async folds (issue 14): a fold that awaits 2 ms per record (an I/O call, say), folded through one
// PartitionFlow (in-memory persistence) in kafkajs-sized batches, from the first batch handed over
// until every record is folded, in four ways in the same run:
//   sequential      asyncConcurrency 1: one record at a time (what `for (m of batch) await fold(m)` does)
//   batch by batch  asyncConcurrency unset (the default): a batch's keys fold concurrently, the next
//                   batch waits for the slowest key of the one before
//   pipelined 64 / 256   asyncConcurrency 64 / 256: at most that many keys fold at once, the next
//                   batch is taken while earlier keys still fold
// Records of a key always fold in offset order (checked: each key's state lists its offsets).
// async_fold_speedup = sequential time ÷ pipelined (256) time; async_fold_vs_batch = batch-by-batch
// time ÷ pipelined (256) time. Keys: uniform, and skewed (every batch has one hot key with a tenth
// of its records, a different key in each batch). `npm run bench:async [-- --quick]`.
import { Registry } from 'prom-client';
import { isQuick, sized } from './lib/args';
import { startProgress } from './lib/progress';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import { FlowMetrics } from '../flow/metrics';
import type { Fold } from '../flow/fold';
import { PartitionFlow } from '../flow/partition-flow';
import type { InputMessage } from '../flow/record';
import { timerPolicy } from '../flow/timers';
import { InMemoryBackend } from '../persistence/memory';

const RECORDS = sized(4_000, 1_000);
const KEYS = sized(1_000, 250);
const BATCH = 500;
const AWAIT_MS = 2;
/** Runs per mode (interleaved), median reported; sequential once (it is the slow one). */
const RUNS = sized(3, 1);
const TP = { topic: 'bench-async', partition: 0 };

type Mode = { name: string; asyncConcurrency: number | undefined };
const MODES: Mode[] = [
  { name: 'sequential (asyncConcurrency 1)', asyncConcurrency: 1 },
  { name: 'batch by batch (default)', asyncConcurrency: undefined },
  { name: 'pipelined (asyncConcurrency 64)', asyncConcurrency: 64 },
  { name: 'pipelined (asyncConcurrency 256)', asyncConcurrency: 256 },
];

const codec = { encode: (n: number) => Buffer.from(String(n)), decode: (b: Buffer) => Number(b.toString()) };
/** Awaits AWAIT_MS, then appends the record's offset: a key's state is the offsets it folded, in order. */
const fold: Fold<number[], number> = async (state, record) => {
  await new Promise((resolve) => setTimeout(resolve, AWAIT_MS));
  return [...(state ?? []), Number(record.offset)];
};

function keyOf(i: number, skewed: boolean): string {
  if (skewed && i % 10 === 0) return `hot${Math.floor(i / BATCH)}`; // one hot key per batch
  return `k${(i * 7919) % KEYS}`;
}

function batches(skewed: boolean): InputMessage[][] {
  const out: InputMessage[][] = [];
  for (let from = 0; from < RECORDS; from += BATCH) {
    const batch: InputMessage[] = [];
    for (let i = from; i < Math.min(from + BATCH, RECORDS); i++) {
      batch.push({ offset: String(i), key: Buffer.from(keyOf(i, skewed)), value: codec.encode(i), timestamp: '0' });
    }
    out.push(batch);
  }
  return out;
}

async function run(mode: Mode, input: InputMessage[][]): Promise<number> {
  const flow = new PartitionFlow<number[], number>({
    flow: 'bench-async',
    ...TP,
    assignedAt: '0',
    fold,
    codec,
    persistence: new InMemoryBackend<number[], number>().forPartition(TP, 'snapshots', 256),
    mode: 'snapshots',
    timers: timerPolicy({ persistPeriodically: {} }),
    asyncConcurrency: mode.asyncConcurrency,
    metrics: FlowMetrics.of(new Registry()),
  });
  await flow.recover();
  const start = process.hrtime.bigint();
  for (const batch of input) {
    const r = flow.handleBatch(batch);
    if (r) await r;
  }
  await flow.drained();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  // Every key folded all its records, in offset order.
  const expected = new Map<string, number[]>();
  for (const batch of input) for (const m of batch) expected.set(String(m.key), [...(expected.get(String(m.key)) ?? []), Number(m.offset)]);
  for (const [key, offsets] of expected) {
    const state = flow.stateOf(key);
    if (!state || state.join() !== offsets.join()) throw new Error(`${mode.name}: key ${key} folded ${state?.join() ?? 'nothing'}, expected ${offsets.join()}`);
  }
  return ms;
}

async function main(): Promise<void> {
  const figures: Record<string, number> = {};
  const rows = [];
  const notes: Record<string, unknown> = { records: RECORDS, keys: KEYS, batch: BATCH, await_ms: AWAIT_MS, runs: RUNS, quick: isQuick() };
  for (const skewed of [false, true]) {
    const input = batches(skewed);
    const label = skewed ? 'skewed' : 'uniform';
    const times = new Map<string, number[]>(MODES.map((m) => [m.name, []]));
    const progress = startProgress(`async folds, ${label} keys`, MODES.length + (RUNS - 1) * (MODES.length - 1), { plainEveryMs: 10_000 });
    for (let r = 0; r < RUNS; r++) {
      for (const mode of MODES) {
        if (r > 0 && mode.asyncConcurrency === 1) continue; // one sequential run is enough (and slow)
        times.get(mode.name)!.push(await run(mode, input));
        progress.tick();
      }
    }
    progress.stop();
    const ms = (name: string) => median(times.get(name)!);
    const seq = ms(MODES[0]!.name);
    const batchMs = ms(MODES[1]!.name);
    const p256 = ms(MODES[3]!.name);
    for (const mode of MODES) {
      rows.push({ keys: label, mode: mode.name, ms: Math.round(ms(mode.name)), records_per_s: Math.round(perSecond(RECORDS, ms(mode.name))), vs_sequential: Number(ratio(seq, ms(mode.name)).toFixed(1)) });
    }
    const suffix = skewed ? '_skewed' : '';
    figures[`async_fold_speedup${suffix}`] = Number(ratio(seq, p256).toFixed(1));
    figures[`async_fold_vs_batch${suffix}`] = Number(ratio(batchMs, p256).toFixed(2));
    figures[`async_batch_by_batch_speedup${suffix}`] = Number(ratio(seq, batchMs).toFixed(1));
    notes[label] = Object.fromEntries([...times].map(([name, t]) => [name, t.map((x) => Math.round(x))]));
  }
  printTable(`async folds: ${RECORDS} records over ${KEYS} keys, batches of ${BATCH}, the fold awaits ${AWAIT_MS} ms per record`, rows);
  process.stdout.write(`async_fold_speedup = ${figures.async_fold_speedup} (goal >= 20), vs batch by batch ${figures.async_fold_vs_batch}; skewed: ${figures.async_fold_speedup_skewed}, vs batch by batch ${figures.async_fold_vs_batch_skewed}\n`);
  const file = writeResults('async', figures, { notes });
  process.stdout.write(`results: ${file}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
