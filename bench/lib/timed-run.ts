import os from 'node:os';
import { localBrokerPid, processCpuMs } from './cpu';
import type { ContestantResult } from './raw';
import { PACKAGE_ROOT } from './results';

/** A contestant (or configuration) of a side-by-side benchmark: its runs' results, or why it stopped. */
export interface Entrant {
  key: string;
  results: ContestantResult[];
  error?: string;
}

/**
 * One run of `e`: its result, with the load average over it and the local broker's CPU over the
 * whole run (when this checkout's infra runs it: serving the fetches, taking the transactions and
 * outputs), joins `e.results`; a failure is kept as `e.error` (its first lines) and printed, and
 * the entrant runs no more.
 */
export async function timedRun(e: Entrant, run: () => Promise<ContestantResult>): Promise<void> {
  try {
    const loadBefore = os.loadavg()[0] ?? 0;
    const broker = localBrokerPid(PACKAGE_ROOT);
    const brokerBefore = processCpuMs(broker);
    const result = await run();
    const brokerAfter = processCpuMs(broker);
    const brokerCpuMs = brokerBefore !== undefined && brokerAfter !== undefined ? brokerAfter - brokerBefore : undefined;
    result.details = {
      ...result.details,
      load_avg_1m: Number(((loadBefore + (os.loadavg()[0] ?? 0)) / 2).toFixed(2)),
      ...(brokerCpuMs !== undefined ? { broker_cpu_ms: brokerCpuMs } : {}),
    };
    e.results.push(result);
  } catch (err) {
    e.error = (err as Error).message.split('\n').slice(0, 3).join(' | ');
    process.stderr.write(`${e.key} failed: ${(err as Error).message}\n`);
  }
}
