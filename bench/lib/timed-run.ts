import os from 'node:os';
import { localBrokerPid, machineBusyMs, processCpuMs } from './cpu';
import type { KafkaMessage } from 'kafkajs';
import { type ContestantResult, foldTotals } from './raw';
import { recordKey, recordValue, type Totals } from './records';
import { PACKAGE_ROOT } from './results';

/** A contestant (or configuration) of a side-by-side benchmark: its runs' results, or why it stopped. */
export interface Entrant {
  key: string;
  results: ContestantResult[];
  error?: string;
}

/**
 * One run of `e`: its result, with the load average over it, the local broker's CPU over the
 * whole run (when this checkout's infra runs it: serving the fetches, taking the transactions and
 * outputs) and `before` (e.g. how quiet the machine was at its start, `waitForQuiet`), joins
 * `e.results`; a failure is kept as `e.error` (its first lines) and printed, and the entrant runs
 * no more.
 */
export async function timedRun(e: Entrant, run: () => Promise<ContestantResult>, before?: Record<string, unknown>): Promise<void> {
  try {
    const loadBefore = os.loadavg()[0] ?? 0;
    const broker = localBrokerPid(PACKAGE_ROOT);
    const brokerBefore = processCpuMs(broker);
    const result = await run();
    const brokerAfter = processCpuMs(broker);
    const brokerCpuMs = brokerBefore !== undefined && brokerAfter !== undefined ? brokerAfter - brokerBefore : undefined;
    result.details = {
      ...result.details,
      ...before,
      load_avg_1m: Number(((loadBefore + (os.loadavg()[0] ?? 0)) / 2).toFixed(2)),
      ...(brokerCpuMs !== undefined ? { broker_cpu_ms: brokerCpuMs } : {}),
    };
    e.results.push(result);
  } catch (err) {
    e.error = (err as Error).message.split('\n').slice(0, 3).join(' | ');
    process.stderr.write(`${e.key} failed: ${(err as Error).message}\n`);
  }
}

/** How `waitForQuiet` judges a window: at most this share of one core busy. */
const QUIET_BROKER_SHARE = 0.1;
const QUIET_MACHINE_CORES = 1;
const QUIET_WINDOW_MS = 500;

/**
 * The machine's speed right now: CPU µs per record of raw's fold (key to string, JSON.parse, a new
 * state in a Map: `foldTotals`) over 50,000 records in memory, in this process, best of 5. On a
 * virtual machine whose host is shared, the same code's CPU per record moves by tens of per cent
 * within minutes while the guest looks idle (another guest on the same physical core): a run's
 * figure is comparable with another's only if this is alike.
 */
export function calibrate(): number {
  const n = 50_000;
  calibration ??= Array.from({ length: n }, (_, i) => ({ key: Buffer.from(recordKey(i, 10_000)), value: Buffer.from(recordValue(i)) }) as KafkaMessage);
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 5; pass++) {
    const states = new Map<string, Totals>();
    const t0 = process.cpuUsage();
    for (const message of calibration) foldTotals(states, message);
    const t = process.cpuUsage(t0);
    best = Math.min(best, (t.user + t.system) / n);
  }
  return Number(best.toFixed(3));
}
let calibration: KafkaMessage[] | undefined;

export interface Quiet {
  /** `calibrate()` once quiet: raw's fold in memory, CPU µs per record. */
  speed_us?: number;
  /** How long it waited (the minimum pause included). */
  waited_ms: number;
  /** The last window's figures: the local broker's share of one core, the machine's busy cores (every process). */
  broker_cores?: number;
  machine_cores?: number;
  /** False when `maxMs` passed first. */
  quiet: boolean;
}

/**
 * Waits at least `minMs` (the previous contestant's clean-up: group leave, topic deletion), then
 * until one `QUIET_WINDOW_MS` window in which this checkout's broker used at most 10 % of a core
 * (a contestant's transactions, its topics' deletion, the log cleaner done) and the whole machine
 * at most one of its cores (a previous contestant's process, the JVM's exit, a neighbour's burst),
 * or `maxMs` in all. Every contestant waits the same way before each of its runs.
 */
export async function waitForQuiet(minMs: number, maxMs: number): Promise<Quiet> {
  const started = Date.now();
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  await sleep(minMs);
  const broker = localBrokerPid(PACKAGE_ROOT);
  for (;;) {
    const b0 = processCpuMs(broker);
    const m0 = machineBusyMs();
    const t0 = Date.now();
    await sleep(QUIET_WINDOW_MS);
    const span = Date.now() - t0;
    const b1 = processCpuMs(broker);
    const m1 = machineBusyMs();
    const brokerCores = b0 !== undefined && b1 !== undefined ? (b1 - b0) / span : undefined;
    const machineCores = m0 !== undefined && m1 !== undefined ? (m1 - m0) / span : undefined;
    const quiet = (brokerCores === undefined || brokerCores <= QUIET_BROKER_SHARE) && (machineCores === undefined || machineCores <= QUIET_MACHINE_CORES);
    const waited = Date.now() - started;
    if (quiet || waited >= maxMs) {
      const r2 = (v: number | undefined) => (v === undefined ? undefined : Number(v.toFixed(2)));
      return { waited_ms: waited, broker_cores: r2(brokerCores), machine_cores: r2(machineCores), quiet, speed_us: calibrate() };
    }
  }
}
