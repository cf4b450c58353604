// The machine's CPU during a run (Linux /proc/stat): how busy the cores were between two samples
// and how many tasks were runnable, so that a run's stalls can be set against its saturation.
import fs from 'node:fs';
import os from 'node:os';

interface Ticks {
  busy: number;
  total: number;
}

function readTicks(): Ticks | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    // cpu user nice system idle iowait irq softirq steal …
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    const total = v.slice(0, 8).reduce((a, x) => a + x, 0);
    return { busy: total - idle, total };
  } catch {
    return undefined; // not Linux: no CPU figures
  }
}

function runnable(): number | undefined {
  try {
    const m = /procs_running (\d+)/.exec(fs.readFileSync('/proc/stat', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Busy share of all cores since the previous sample, and runnable tasks now, appended to `file`. */
export class CpuLog {
  private last = readTicks();
  readonly busyShares: number[] = [];

  constructor(private readonly file: string) {}

  /** One line `<s> busy=<%> runnable=<n> cores=<n>`; `s` is the run's clock. */
  sample(s: number): void {
    const now = readTicks();
    if (!now || !this.last || now.total === this.last.total) return;
    const busy = (now.busy - this.last.busy) / (now.total - this.last.total);
    this.last = now;
    this.busyShares.push(busy);
    fs.appendFileSync(this.file, `${s} busy=${(busy * 100).toFixed(0)}% runnable=${runnable() ?? '-'} cores=${os.cpus().length}\n`);
  }
}
