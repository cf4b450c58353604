// Per-key timers: how fast a partition fires them with 1M pending, against a plain loop over a
// binary heap of the same timers and a Map of the same states (the least any timer service does);
// what a pending timer costs in heap; and what a timer adds to a snapshot record.
// Figures: timers_fired_per_s, plain_heap_fired_per_s, timers_vs_plain_heap (engine time / plain
// time; aim <= 2), bytes_per_pending_timer, snapshot_bytes, snapshot_with_timer_bytes.
// `npm run bench:timers [-- --quick]`. The heap figure is measured in child processes of their own
// (`node --expose-gc`), one with timers and one without, so nothing else lives in the heap.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Registry } from 'prom-client';
import { isQuick, sized } from './lib/args';
import { PACKAGE_ROOT, writeResults } from './lib/results';
import { printTable } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import type { Codec } from '../core/codec/codec';
import type { Fold, OnTimer } from '../flow/fold';
import { FlowMetrics } from '../flow/metrics';
import { PartitionFlow } from '../flow/partition-flow';
import type { InputMessage } from '../flow/record';
import { timerPolicy } from '../flow/timers';
import { snapshotFormat } from '../persistence/kafka/snapshot-format';
import { InMemoryBackend } from '../persistence/memory';

const TIMERS = sized(1_000_000, 50_000);
const RUNS = sized(3, 1);
const BATCH = 1_000;
const BASE = 1_800_000_000_000;
const TP = { topic: 'bench', partition: 0 };

const codec: Codec<number> = {
  encode: (n) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  },
  decode: (b) => b.readUInt32BE(0),
};
/** Each key's only record sets one timer, at a time of its own (keys fire in key order). */
const withTimer: Fold<number, number> = (_s, record, ctx) => {
  ctx.timers.at(BASE + record.value, { name: 't' });
  return record.value;
};
const withoutTimer: Fold<number, number> = (_s, record) => record.value;
const onTimer: OnTimer<number> = (state) => state + 1;

function batches(n: number): InputMessage[][] {
  const out: InputMessage[][] = [];
  for (let from = 0; from < n; from += BATCH) {
    const batch: InputMessage[] = [];
    for (let i = from; i < Math.min(from + BATCH, n); i++) batch.push({ offset: String(i), key: Buffer.from(`key-${i}`), value: codec.encode(i), timestamp: String(BASE) });
    out.push(batch);
  }
  return out;
}

async function flowWith(fold: Fold<number, number>, input: readonly InputMessage[][]): Promise<PartitionFlow<number, number>> {
  const flow = new PartitionFlow<number, number>({
    flow: 'bench',
    topic: TP.topic,
    partition: TP.partition,
    assignedAt: '0',
    fold,
    onTimer,
    codec,
    persistence: new InMemoryBackend<number, number>().forPartition(TP, 'snapshots', 256),
    mode: 'snapshots',
    timers: timerPolicy({}),
    metrics: FlowMetrics.of(new Registry()),
  });
  await flow.recover();
  for (const b of input) await flow.handleBatch(b);
  return flow;
}

/** The engine: one triggerTimers at a time past every timer fires them all. */
async function engineRun(input: readonly InputMessage[][], n = TIMERS): Promise<number> {
  const flow = await flowWith(withTimer, input);
  const start = process.hrtime.bigint();
  flow.triggerTimers(BASE + n);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  for (const i of [0, n >> 1, n - 1]) {
    if (flow.stateOf(`key-${i}`) !== i + 1) throw new Error(`key-${i} did not fire once: ${flow.stateOf(`key-${i}`)}`);
  }
  return ms;
}

/** The baseline: the same timers in a binary heap of [at, key] and the states in a Map, popped in order. */
function plainRun(): number {
  const heap: Array<[number, string]> = [];
  const states = new Map<string, number>();
  const push = (e: [number, string]) => {
    heap.push(e);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (heap[p]![0] <= e[0]) break;
      heap[i] = heap[p]!;
      i = p;
    }
    heap[i] = e;
  };
  const pop = (): [number, string] | undefined => {
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        let v = last;
        if (l < heap.length && heap[l]![0] < v[0]) {
          m = l;
          v = heap[l]!;
        }
        if (r < heap.length && heap[r]![0] < v[0]) m = r;
        if (m === i) break;
        heap[i] = heap[m]!;
        i = m;
      }
      heap[i] = last;
    }
    return top;
  };
  for (let i = 0; i < TIMERS; i++) {
    const key = `key-${i}`;
    states.set(key, i);
    push([BASE + i, key]);
  }
  const until = BASE + TIMERS;
  const start = process.hrtime.bigint();
  for (let top = heap[0]; top !== undefined && top[0] <= until; top = heap[0]) {
    pop();
    states.set(top[1], onTimer(states.get(top[1])!, { key: top[1], name: 't', at: top[0], time: 'processing' }, undefined as never)!);
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (states.get(`key-${TIMERS - 1}`) !== TIMERS) throw new Error('the plain loop did not fire every timer');
  return ms;
}

/** Child: heap used (after gc) by a partition of TIMERS keys, each with one pending timer or none. */
async function heapChild(timers: boolean): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the child with node --expose-gc');
  const input = batches(TIMERS);
  const flow = await flowWith(timers ? withTimer : withoutTimer, input);
  input.length = 0;
  for (let i = 0; i < 3; i++) gc();
  const used = process.memoryUsage().heapUsed;
  if (flow.liveKeys !== TIMERS) throw new Error(`${flow.liveKeys} keys`);
  process.stdout.write(`RESULT ${JSON.stringify({ used })}\n`);
}

function heapUsed(timers: boolean): number {
  const run = spawnSync(process.execPath, ['--expose-gc', path.join(PACKAGE_ROOT, 'bin', 'run-ts.js'), __filename, '--child', timers ? 'timers' : 'plain', ...(isQuick() ? ['--quick'] : [])], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  const line = run.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (run.status !== 0 || !line) throw new Error(`the heap child failed: ${run.stderr}`);
  return (JSON.parse(line.slice('RESULT '.length)) as { used: number }).used;
}

async function main(): Promise<void> {
  const input = batches(TIMERS);
  await engineRun(batches(1_000), 1_000); // warm the paths up
  plainRun();
  const engineTimes: number[] = [];
  const plainTimes: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    engineTimes.push(await engineRun(input));
    plainTimes.push(plainRun());
  }
  const withTimers = heapUsed(true);
  const without = heapUsed(false);
  const format = snapshotFormat<{ orders: number; first: number; last: number }>();
  const state = { orders: 12, first: BASE, last: BASE + 25_000 };
  const engineMs = median(engineTimes);
  const plainMs = median(plainTimes);
  const figures = {
    timers_fired_per_s: Math.round(perSecond(TIMERS, engineMs)),
    plain_heap_fired_per_s: Math.round(perSecond(TIMERS, plainMs)),
    timers_vs_plain_heap: Number(ratio(engineMs, plainMs).toFixed(3)),
    bytes_per_pending_timer: Math.round((withTimers - without) / TIMERS),
    snapshot_bytes: format.encode({ state, offset: 123_456 }).length,
    snapshot_with_timer_bytes: format.encode({ state, offset: 123_456, timers: [{ name: 'close', at: BASE + 55_000, time: 'event' }] }).length,
  };
  printTable(`timers: ${TIMERS} pending on one partition, all fired by one tick, median of ${RUNS}`, [
    { path: 'engine (PartitionFlow.triggerTimers → onTimer)', ms: Number(engineMs.toFixed(1)), fired_per_s: figures.timers_fired_per_s },
    { path: 'plain loop over a binary heap, same onTimer', ms: Number(plainMs.toFixed(1)), fired_per_s: figures.plain_heap_fired_per_s },
  ]);
  process.stdout.write(`timers_vs_plain_heap = ${figures.timers_vs_plain_heap} (aim <= 2)\n`);
  process.stdout.write(`bytes_per_pending_timer = ${figures.bytes_per_pending_timer} (heap with a timer on each of ${TIMERS} keys minus without)\n`);
  process.stdout.write(`snapshot record: ${figures.snapshot_bytes} bytes, with one timer ${figures.snapshot_with_timer_bytes}\n`);
  const file = writeResults('timers', figures, { notes: { timers: TIMERS, runs: RUNS, quick: isQuick(), onTimer: 'state + 1', keys: 'one timer per key' } });
  process.stdout.write(`results: ${file}\n`);
}

const child = process.argv.indexOf('--child');
if (child >= 0) {
  heapChild(process.argv[child + 1] === 'timers').catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
