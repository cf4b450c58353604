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
