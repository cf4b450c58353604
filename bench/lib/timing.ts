/** Milliseconds `fn` takes (awaited if it returns a promise), by process.hrtime.bigint. */
export async function measure(fn: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Milliseconds a synchronous `fn` takes; no promise, so no event-loop turn in the figure. */
export function measureSync(fn: () => unknown): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Runs `fn` `runs` times (after `warmup` untimed runs) and returns the median milliseconds. */
export async function measureMedian(fn: () => unknown, runs: number, warmup = 1): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await measure(fn));
  return median(times);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Operations per second for `count` operations in `ms` milliseconds. */
export function perSecond(count: number, ms: number): number {
  if (!(ms > 0)) throw new RangeError(`cannot compute a rate over ${ms} ms`);
  return (count * 1000) / ms;
}

/**
 * `value / baseline`, e.g. a time against the baseline's time measured in the same process run.
 * Throws rather than write Infinity or NaN into a results file.
 */
export function ratio(value: number, baseline: number): number {
  if (!(baseline > 0) || !Number.isFinite(value)) {
    throw new RangeError(`cannot compute a ratio of ${value} to a baseline of ${baseline}`);
  }
  return value / baseline;
}

/**
 * Ratio figures of each measurement to the one named `baseline`: `{ a: 10, b: 25 }` with baseline
 * `a` gives `{ b_vs_a: 2.5 }` (the baseline itself is left out).
 */
export function ratioFigures(measurements: Record<string, number>, baseline: string): Record<string, number> {
  const base = measurements[baseline];
  if (base === undefined) throw new RangeError(`no baseline measurement named "${baseline}"`);
  const out: Record<string, number> = {};
  for (const [name, value] of Object.entries(measurements)) {
    if (name !== baseline) out[`${name}_vs_${baseline}`] = ratio(value, base);
  }
  return out;
}
