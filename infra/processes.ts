import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

// Lives in config/net (the worker uses it too); re-exported for infra's servers and chaos/servers.ts.
export { portOpen } from '../config/net';

/**
 * Background server processes started by `infra up`: detached, output appended to a log file,
 * their pid written to a pid file so that `infra down` stops exactly what `up` started.
 */
export interface ManagedProcess {
  name: string;
  pidFile: string;
  logFile: string;
  /** A string that must appear in the process's command line: guards against a recycled pid. */
  marker: string;
}

export function startDetached(
  p: ManagedProcess,
  command: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): number {
  fs.mkdirSync(path.dirname(p.pidFile), { recursive: true });
  fs.mkdirSync(path.dirname(p.logFile), { recursive: true });
  const log = fs.openSync(p.logFile, 'a');
  fs.writeSync(log, `\n=== ${new Date().toISOString()} starting ${p.name}: ${command} ${args.join(' ')}\n`);
  const child = spawn(command, args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    detached: true,
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error(`could not spawn ${command}`);
  child.unref();
  fs.writeFileSync(p.pidFile, String(child.pid));
  return child.pid;
}

/** The pid from the pid file, if that process is still alive and is ours. */
export function livePid(p: ManagedProcess): number | undefined {
  const pid = recordedPid(p);
  return pid !== undefined && isOurs(pid, p.marker) ? pid : undefined;
}

export function recordedPid(p: ManagedProcess): number | undefined {
  try {
    const pid = Number(fs.readFileSync(p.pidFile, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isOurs(pid: number, marker: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
  } catch {
    return true; // no /proc: trust the signal check
  }
}

/** SIGTERM the process group, wait for exit, SIGKILL after the grace period. */
export async function stopProcess(p: ManagedProcess, graceMs = 30_000): Promise<'stopped' | 'killed' | 'not-running'> {
  const pid = livePid(p);
  if (pid === undefined) {
    fs.rmSync(p.pidFile, { force: true });
    return 'not-running';
  }
  signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isOurs(pid, p.marker)) {
      fs.rmSync(p.pidFile, { force: true });
      return 'stopped';
    }
    await sleep(200);
  }
  signal(pid, 'SIGKILL');
  await sleep(200);
  fs.rmSync(p.pidFile, { force: true });
  return 'killed';
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig); // the whole group: wrappers (java launcher scripts) and their children
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  }
}

export function tailLog(file: string, lines = 20): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log yet)';
  }
}
