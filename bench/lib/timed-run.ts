import os from 'node:os';
import type { ContestantResult } from './raw';

/** A contestant (or configuration) of a side-by-side benchmark: its runs' results, or why it stopped. */
export interface Entrant {
  key: string;
  results: ContestantResult[];
  error?: string;
}

/**
 * One run of `e`: its result, with the load average over it, joins `e.results`; a failure is kept
 * as `e.error` (its first lines) and printed, and the entrant runs no more.
 */
export async function timedRun(e: Entrant, run: () => Promise<ContestantResult>): Promise<void> {
  try {
    const loadBefore = os.loadavg()[0] ?? 0;
    const result = await run();
    result.details = { ...result.details, load_avg_1m: Number(((loadBefore + (os.loadavg()[0] ?? 0)) / 2).toFixed(2)) };
    e.results.push(result);
  } catch (err) {
    e.error = (err as Error).message.split('\n').slice(0, 3).join(' | ');
    process.stderr.write(`${e.key} failed: ${(err as Error).message}\n`);
  }
}
