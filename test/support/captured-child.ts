import type { ChildProcess } from 'node:child_process';

/** What a spawned process printed (its piped stdout and stderr, interleaved as they came) and its exit code. */
export function captureOutput(child: ChildProcess): { output: () => string; exited: Promise<number | null> } {
  let out = '';
  const append = (d: Buffer) => {
    out += d.toString();
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { output: () => out, exited };
}

/** How a spawned process ended: its exit code or signal, and its piped stdout and stderr apart. */
export interface ChildEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Collects a spawned process's stdout and stderr apart, and resolves with them once it exits. */
export function childEnd(child: ChildProcess): Promise<ChildEnd> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr })));
}
