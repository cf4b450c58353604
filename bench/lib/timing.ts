/** Milliseconds `fn` takes (awaited if it returns a promise), by process.hrtime.bigint. */
export async function measure(fn: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
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
