import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'kafka-flow-temporal.js');
export const CHAOS_FLOW_MODULE = path.join(ROOT, 'chaos', 'flow.ts');

/** One `kafka-flow-temporal worker` process of the chaos flow, started through the public CLI. */
export interface ChaosWorker {
  name: string;
  child: ChildProcess;
  logFile: string;
  stateDir?: string;
  startedAt: number;
  exited: Promise<number | null>;
  /** A fault holds it (stopped, being stopped): no other fault picks it. */
  busy: boolean;
  /** The driver stopped or killed it on purpose. */
  expectedExit: boolean;
  /** Burst workers leave again; they never get replaced. */
  burst: boolean;
}

export interface PoolOptions {
  /** The mode's id: workers are named `<id>-<n>`. */
  id: string;
  logDir: string;
  env: NodeJS.ProcessEnv;
  /** Per-worker local state (KFT_STATE_DIR) under this dir, when set. */
  stateRoot?: string;
  /** Called with each line worth putting in the fault log (unexpected exits, restarts). */
  event: (line: string) => void;
}

/**
 * The workers of one persistence mode. A worker that exits on its own (not stopped or killed by
 * a fault) is replaced after a second, as a supervisor would, and counted as a crash.
 */
export class WorkerPool {
  readonly all: ChaosWorker[] = [];
  crashes = 0;
  private seq = 0;
  private closing = false;

  constructor(readonly o: PoolOptions) {}

  get alive(): ChaosWorker[] {
    return this.all.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  }

  /** Starts a worker; `stateDir` reuses a dead worker's local state (a restarted pod keeps its volume). */
  start(opts: { stateDir?: string; burst?: boolean } = {}): ChaosWorker {
    const name = `${this.o.id}-${++this.seq}`;
    const logFile = path.join(this.o.logDir, `${name}.log`);
    const stateDir = this.o.stateRoot ? (opts.stateDir ?? path.join(this.o.stateRoot, name)) : undefined;
    if (stateDir) fs.mkdirSync(stateDir, { recursive: true });
    const fd = fs.openSync(logFile, 'a');
    const child = spawn(process.execPath, [BIN, 'worker', CHAOS_FLOW_MODULE], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'info', ...this.o.env, ...(stateDir ? { KFT_STATE_DIR: stateDir } : {}) },
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    const w: ChaosWorker = {
      name,
      child,
      logFile,
      stateDir,
      startedAt: Date.now(),
      exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null)))),
      busy: false,
      expectedExit: false,
      burst: opts.burst ?? false,
    };
    child.once('exit', (code, signal) => {
      if (w.expectedExit || this.closing) return;
      this.crashes++;
      this.o.event(`worker ${name} (pid ${child.pid}) exited on its own: code ${code} signal ${signal}; log ${logFile}`);
      if (!w.burst) {
        setTimeout(() => {
          if (this.closing) return;
          const next = this.start({ stateDir: w.stateDir });
          this.o.event(`worker ${next.name} (pid ${next.child.pid}) started to replace ${name}`);
        }, 1000);
      }
    });
    this.all.push(w);
    return w;
  }

  /** A worker no fault holds (and `wanted` accepts), chosen by `pick` in [0, 1); bursts' workers are left to their burst. */
  pickIdle(pick: number, wanted?: (w: ChaosWorker) => boolean): ChaosWorker | undefined {
    const idle = this.alive.filter((w) => !w.busy && !w.burst && (wanted === undefined || wanted(w)));
    return idle.length === 0 ? undefined : idle[Math.min(idle.length - 1, Math.floor(pick * idle.length))];
  }

  kill9(w: ChaosWorker): Promise<number | null> {
    w.expectedExit = true;
    signal(w, 'SIGKILL');
    return w.exited;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(w: ChaosWorker, graceMs = 60_000): Promise<{ code: number | null; killed: boolean }> {
    w.expectedExit = true;
    signal(w, 'SIGCONT');
    signal(w, 'SIGTERM');
    const code = await Promise.race([w.exited, sleep(graceMs).then(() => 'timeout' as const)]);
    if (code !== 'timeout') return { code, killed: false };
    signal(w, 'SIGKILL');
    return { code: await w.exited, killed: true };
  }

  /** Graceful stop of every worker (the end of the run); returns each one's exit. */
  async stopAll(graceMs = 60_000): Promise<Array<{ name: string; code: number | null; killed: boolean }>> {
    this.closing = true;
    return Promise.all(this.alive.map(async (w) => ({ name: w.name, ...(await this.stop(w, graceMs)) })));
  }

  /** kill -9 of whatever is left (cleanup after a failure). */
  async killAll(): Promise<void> {
    this.closing = true;
    for (const w of this.alive) {
      w.expectedExit = true;
      signal(w, 'SIGCONT');
      signal(w, 'SIGKILL');
    }
    await Promise.all(this.all.map((w) => w.exited));
  }
}

export function signal(w: ChaosWorker, sig: NodeJS.Signals): void {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return;
  try {
    w.child.kill(sig);
  } catch {
    /* gone */
  }
}
