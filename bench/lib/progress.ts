import { Presets, SingleBar } from 'cli-progress';

export interface Progress {
  /** Adds `n` (default 1) to the count done. */
  tick(n?: number): void;
  /** Sets the count done. */
  update(done: number): void;
  stop(): void;
}

/**
 * A progress bar for a long run, on stdout. On a terminal it redraws in place; elsewhere (CI logs,
 * a pipe) cli-progress prints a plain line every `plainEveryMs` instead. BENCH_PROGRESS=0 turns it off.
 */
export function startProgress(label: string, total: number, options: { plainEveryMs?: number } = {}): Progress {
  if (process.env.BENCH_PROGRESS === '0') {
    return { tick() {}, update() {}, stop() {} };
  }
  const bar = new SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | {value}/{total} | {duration_formatted} elapsed, ETA {eta_formatted}`,
      stream: process.stdout,
      noTTYOutput: true,
      notTTYSchedule: options.plainEveryMs ?? 10_000,
      hideCursor: true,
      etaBuffer: 50,
    },
    Presets.shades_classic,
  );
  bar.start(total, 0);
  let stopped = false;
  return {
    tick: (n = 1) => bar.increment(n),
    update: (done) => bar.update(done),
    stop: () => {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
