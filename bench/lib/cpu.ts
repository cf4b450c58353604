// CPU time, for figures that survive a shared machine: on a box where neighbours' load swings
// wall-clock rates by 2×, the CPU a contestant spends per record barely moves.
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ: 100 on every Linux we know). */
const TICKS_PER_S = 100;

/**
 * User + system CPU milliseconds a process (all its threads) has used so far, from
 * /proc/<pid>/stat (Linux; 10 ms resolution); undefined where there is no /proc or it has exited.
 */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1000) / TICKS_PER_S : undefined;
  } catch {
    return undefined;
  }
}

/** CPU milliseconds of this process so far (process.cpuUsage, µs resolution). */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** µs of CPU per record between two readings, or undefined if either is missing. */
export function cpuUsPerRecord(fromMs: number | undefined, toMs: number | undefined, records: number): number | undefined {
  if (fromMs === undefined || toMs === undefined || records <= 0) return undefined;
  return Number((((toMs - fromMs) * 1000) / records).toFixed(2));
}

/**
 * The local Kafka broker's pid, when `npm run infra:up` of this checkout started it (its pid file)
 * and it still runs; undefined otherwise (e.g. a broker started elsewhere).
 */
export function localBrokerPid(packageRoot: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(packageRoot, '.cache', 'data', 'run', 'kafka.pid'), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('kafka') ? pid : undefined;
  } catch {
    return undefined;
  }
}
