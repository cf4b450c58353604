// The Kafka Streams side of the offset-hash benchmarks (bench/anchors/kafka-streams RebalanceApp:
// the offset-hash topology of test/fixtures/offset-hash-flow.ts in a changelogged store, EOS v2,
// session timeout 6 s, heartbeat 1 s, a fold probe file): an instance shaped as a FlowWorker, its
// fold probe read back, and its exactness from the store's changelog. bench:failover uses these;
// bench:rebalance uses the same helpers.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createInterface } from 'node:readline';
import { createKafkaClient, PartitionReader } from '../../kafka';
import { type HashState, step as foldStep } from '../../test/fixtures/offset-hash-flow';
import { findJava17 } from '../../infra/java';
import { STREAMS_JAR, stopChild } from './anchors';
import { type FlowWorker, type LoggedLine, tallyOffsetHash } from './flow-workers';

export interface StreamsAppOptions {
  /** num.standby.replicas; default 0 (the app's default). */
  standbys?: number;
  /** Append the instance's lines here (BENCH_WORKER_LOG). */
  logFile?: string;
}

/**
 * A RebalanceApp instance (application.id and input topic both `id`) with its own state dir and
 * fold log; its lines kept with the driver's receive time (`STATE <state> <epoch ms>` on each
 * state change).
 */
export function spawnStreamsApp(name: string, id: string, brokers: string[], stateDir: string, foldLog: string, options: StreamsAppOptions = {}): FlowWorker {
  const args = ['-Xmx256m', '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn', '-cp', STREAMS_JAR, 'kft.bench.RebalanceApp', brokers.join(','), id, id, stateDir, foldLog];
  if (options.standbys !== undefined) args.push(String(options.standbys));
  const child = spawn(findJava17(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: LoggedLine[] = [];
  const keep = (line: string) => {
    const entry: LoggedLine = { at: performance.now(), line };
    lines.push(entry);
    if (lines.length > 20_000) lines.splice(0, 10_000);
    if (options.logFile) fs.appendFileSync(options.logFile, `${Math.round(entry.at)} [ks-${name}] ${line}\n`);
    if (/FATAL|ERROR/.test(line)) process.stderr.write(`[ks-${name}] ${line}\n`);
  };
  createInterface({ input: child.stdout! }).on('line', keep);
  createInterface({ input: child.stderr! }).on('line', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    process: child,
    lines,
    exited,
    firstLine: (match, after = 0) => lines.find((l) => l.at >= after && match(l)),
    stop: (ms = 60_000) => stopChild(child, ms),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** The instance's last `STATE` (RUNNING, REBALANCING, …), or undefined before the first. */
export function streamsState(w: FlowWorker): string | undefined {
  return [...w.lines].reverse().find((l) => l.line.startsWith('STATE '))?.line.split(' ')[1];
}

/** A fold-probe line: the first record of a partition after 10 ms without a line. */
export interface FoldProbe {
  /** Epoch ms. */
  t: number;
  partition: number;
  offset: number;
}

/** Every complete line of a fold log (`<epoch ms> <partition> <offset>`); none if it is not there yet. */
export function readFoldLog(file: string): FoldProbe[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: FoldProbe[] = [];
  const lines = text.split('\n');
  lines.pop(); // the last is empty or still being written
  for (const line of lines) {
    const [t, partition, offset] = line.split(' ').map(Number);
    if (Number.isFinite(t) && Number.isInteger(partition) && Number.isFinite(offset)) out.push({ t: t!, partition: partition!, offset: offset! });
  }
  return out;
}

/**
 * RebalanceApp's exactness, as compareOffsetHash for ours: its store's changelog (read committed,
 * the last value of each key: count int64, hash int32, last offset int64) against a plain fold of
 * the input topic.
 */
export async function compareStreamsOffsetHash(topic: string, changelog: string, partitions: number, brokers: string[]) {
  const client = createKafkaClient({ brokers, clientId: 'bench-reference', logLevel: 'error' });
  const reader = new PartitionReader(client);
  const reference = new Map<string, HashState>();
  const stored = new Map<string, HashState>();
  let records = 0;
  try {
    for (let p = 0; p < partitions; p++) {
      await reader.read({
        topic,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            const key = String(r.key);
            reference.set(key, foldStep(reference.get(key), r.offset));
            records++;
          }
        },
      });
      await reader.read({
        topic: changelog,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            const key = String(r.key);
            if (r.value === null) stored.delete(key);
            else stored.set(key, { count: Number(r.value.readBigInt64BE(0)), hash: r.value.readInt32BE(8), last: String(r.value.readBigInt64BE(12)) });
          }
        },
      });
    }
  } finally {
    await reader.close();
  }
  return tallyOffsetHash(reference, stored, records);
}
