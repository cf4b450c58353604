// The engine's overhead over a plain loop: the same in-memory records (kafkajs-shaped, Buffer keys
// and values) folded by the same trivial fold, once through PartitionFlow.handleBatch and once
// through a loop that does only what any consumer must (key to string, decode, build the record,
// Map get/set). engine_vs_plain_loop = engine time / plain-loop time (aim: <= 3).
// `npm run bench:engine [-- --quick]`.
import { Registry } from 'prom-client';
import { isQuick, sized } from './lib/args';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { median, perSecond, ratio } from './lib/timing';
import type { Codec } from '../core/codec/codec';
import { discardingContext, type Fold } from '../flow/fold';
import { FlowMetrics } from '../flow/metrics';
import { PartitionFlow } from '../flow/partition-flow';
import type { FlowRecord, InputMessage } from '../flow/record';
import { timerPolicy } from '../flow/timers';
import { InMemoryBackend } from '../persistence/memory';

const RECORDS = sized(1_000_000, 100_000);
const KEYS = 10_000;
const BATCH = 1_000;
const RUNS = 3;
const TP = { topic: 'bench', partition: 0 };

const codec: Codec<number> = {
  encode: (n) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  },
  decode: (b) => b.readUInt32BE(0),
};
const fold: Fold<number, number> = (state, record) => (state ?? 0) + record.value;

function makeBatches(): InputMessage[][] {
  const keys = Array.from({ length: KEYS }, (_, k) => Buffer.from(`key-${k}`));
  const batches: InputMessage[][] = [];
  for (let from = 0; from < RECORDS; from += BATCH) {
    const batch: InputMessage[] = [];
    for (let i = from; i < Math.min(from + BATCH, RECORDS); i++) {
      batch.push({ offset: String(i), key: keys[i % KEYS]!, value: codec.encode(i % 100), timestamp: '1700000000000' });
    }
    batches.push(batch);
  }
  return batches;
}

function plainLoop(batches: readonly InputMessage[][]): Map<string, number | undefined> {
  const states = new Map<string, number | undefined>();
  for (const batch of batches) {
    for (const m of batch) {
      const key = (m.key as Buffer).toString('utf8');
      const record: FlowRecord<number> = {
        topic: TP.topic,
        partition: TP.partition,
        offset: m.offset,
        key,
        value: codec.decode(m.value!),
        timestamp: m.timestamp,
        headers: {},
      };
      states.set(key, fold(states.get(key), record, discardingContext) as number | undefined);
    }
  }
  return states;
}

async function engine(batches: readonly InputMessage[][]): Promise<{ flow: PartitionFlow<number, number>; foldMs: number }> {
  const backend = new InMemoryBackend<number, number>();
  const flow = new PartitionFlow<number, number>({
    flow: 'bench',
    topic: TP.topic,
    partition: TP.partition,
    assignedAt: '0',
    fold,
    codec,
    persistence: backend.forPartition(TP, 'snapshots', 256),
    mode: 'snapshots',
    timers: timerPolicy({ persistPeriodically: {} }),
    metrics: FlowMetrics.of(new Registry()),
  });
  await flow.recover();
  const start = process.hrtime.bigint();
  for (let i = 0; i < batches.length; i++) {
    const r = flow.handleBatch(batches[i]!);
    if (r) await r;
    // The runtime triggers key timers about once a second; here every 100 batches.
    if (i % 100 === 99) flow.triggerTimers();
  }
  const foldMs = Number(process.hrtime.bigint() - start) / 1e6;
  return { flow, foldMs };
}

async function main(): Promise<void> {
  const batches = makeBatches();
  // Warm both paths up so the JIT has seen them before anything is timed.
  plainLoop(batches.slice(0, 50));
  await engine(batches.slice(0, 50));

  const plainTimes: number[] = [];
  const engineTimes: number[] = [];
  const persistTimes: number[] = [];
  let expected: Map<string, number | undefined> | undefined;
  for (let run = 0; run < RUNS; run++) {
    const start = process.hrtime.bigint();
    expected = plainLoop(batches);
    plainTimes.push(Number(process.hrtime.bigint() - start) / 1e6);

    const { flow, foldMs } = await engine(batches);
    engineTimes.push(foldMs);
    for (const [key, state] of expected) {
      if (flow.stateOf(key) !== state) throw new Error(`engine and plain loop disagree on ${key}`);
    }
    const p0 = process.hrtime.bigint();
    const result = await flow.persist(Date.now(), 'shutdown');
    persistTimes.push(Number(process.hrtime.bigint() - p0) / 1e6);
    if (result.written !== KEYS || result.committed !== RECORDS) throw new Error(`unexpected persist: ${JSON.stringify(result)}`);
  }

  const plainMs = median(plainTimes);
  const engineMs = median(engineTimes);
  const figures = {
    engine_records_per_sec: Math.round(perSecond(RECORDS, engineMs)),
    plain_loop_records_per_sec: Math.round(perSecond(RECORDS, plainMs)),
    engine_vs_plain_loop: Number(ratio(engineMs, plainMs).toFixed(3)),
    persist_10k_keys_ms: Number(median(persistTimes).toFixed(1)),
  };
  printTable(`engine: ${RECORDS} records over ${KEYS} keys, batches of ${BATCH}, median of ${RUNS}`, [
    { path: 'engine (PartitionFlow.handleBatch)', ms: Number(engineMs.toFixed(1)), records_per_sec: figures.engine_records_per_sec },
    { path: 'plain loop, same fold', ms: Number(plainMs.toFixed(1)), records_per_sec: figures.plain_loop_records_per_sec },
  ]);
  process.stdout.write(`engine_vs_plain_loop = ${figures.engine_vs_plain_loop} (aim <= 3)\n`);
  process.stdout.write(`persist of ${KEYS} dirty keys (in-memory, chunks of 256) = ${figures.persist_10k_keys_ms} ms\n`);
  const file = writeResults('engine', figures, {
    notes: { records: RECORDS, keys: KEYS, batch: BATCH, runs: RUNS, quick: isQuick(), fold: 'sum of a uint32 value' },
  });
  process.stdout.write(`results: ${file}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
