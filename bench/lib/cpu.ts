// CPU time, for figures that survive a shared machine: on a box where neighbours' load swings
// wall-clock rates by 2×, the CPU a contestant spends per record barely moves.
import { readdirSync, readFileSync } from 'node:fs';
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
  return localServerPid(packageRoot, 'kafka');
}

/**
 * The pid of a server `npm run infra:up` of this checkout started (its pid file under
 * .cache/data/run), if that process still runs and its command line names it; undefined otherwise.
 */
export function localServerPid(packageRoot: string, server: 'kafka' | 'temporal' | 'cassandra'): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(packageRoot, '.cache', 'data', 'run', `${server}.pid`), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(server) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU milliseconds per thread name of a process so far (/proc/<pid>/task/<tid>/stat; threads of
 * one name summed): `main` is the process's main thread; Node 20 leaves its other threads named
 * `node` (worker threads, V8's helpers — the parallel scavenger, concurrent marking, compilers — and
 * the libuv pool), Temporal core's Rust threads are `tokio-runtime-w`; undefined where there is no
 * /proc or the process has exited.
 */
export function threadCpuMs(pid: number | undefined): Record<string, number> | undefined {
  if (pid === undefined) return undefined;
  try {
    const byName: Record<string, number> = {};
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = tid === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_S;
        if (Number.isFinite(ms)) byName[name] = (byName[name] ?? 0) + ms;
      } catch {
        // the thread ended
      }
    }
    return byName;
  } catch {
    return undefined;
  }
}

/** Per-name differences `to - from` (names only in `to` count from 0), dropping zeros. */
export function threadCpuDelta(from: Record<string, number> | undefined, to: Record<string, number> | undefined): Record<string, number> | undefined {
  if (!from || !to) return undefined;
  const out: Record<string, number> = {};
  for (const [name, ms] of Object.entries(to)) {
    const d = ms - (from[name] ?? 0);
    if (d > 0) out[name] = Math.round(d);
  }
  return out;
}

/** CPU milliseconds the whole machine (all CPUs, all processes) has been busy so far (/proc/stat). */
export function machineBusyMs(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: busy = all but idle and iowait
    const busy = fields.slice(0, 8).reduce((s, v, i) => (i === 3 || i === 4 ? s : s + v), 0);
    return (busy * 1000) / TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** A process's resident memory now and its peak so far, in MiB (/proc/<pid>/status VmRSS, VmHWM). */
export function processMemoryMb(pid: number | undefined): { rss: number; peak: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
    const rss = kb('VmRSS');
    const peak = kb('VmHWM');
    return Number.isFinite(rss) && Number.isFinite(peak) ? { rss: Math.round(rss / 1024), peak: Math.round(peak / 1024) } : undefined;
  } catch {
    return undefined;
  }
}
