// The commit lag of a contestant under load: at each poll of the group's committed offsets, how
// long ago the fold passed the committed offset of each partition still behind its end — i.e. how
// old the committed position is. `commit_lag_p99_ms` of bench:throughput is the 99th percentile
// over every (poll, partition) pair while folding (first record folded → last record folded).

/** When the fold had reached `pos` (the next offset to fold) on a partition, in wall-clock ms. */
export type PositionLog = ReadonlyMap<number, ReadonlyArray<readonly [atMs: number, pos: number]>>;

export interface CommitSample {
  readonly atMs: number;
  readonly committed: ReadonlyMap<number, bigint>;
}

/**
 * Every (sample, partition) lag in ms within [fromMs, toMs]. A partition whose committed offset is
 * at or past its end has no lag; one whose committed offset the fold had not passed in the log
 * yet (positions are logged every few records) counts 0; one with nothing committed (or only the
 * start) has been lagging since `fromMs` (the first record folded).
 */
export function commitLags(positions: PositionLog, samples: readonly CommitSample[], end: ReadonlyMap<number, bigint>, fromMs: number, toMs: number): number[] {
  const lags: number[] = [];
  for (const s of samples) {
    if (s.atMs < fromMs || s.atMs > toMs) continue;
    for (const [partition, e] of end) {
      if (e <= 0n) continue;
      const c = s.committed.get(partition) ?? -1n;
      if (c >= e) continue;
      const log = positions.get(partition) ?? [];
      let passedAt: number | undefined;
      if (c <= 0n) passedAt = fromMs;
      else {
        for (const [at, pos] of log) {
          if (BigInt(pos) >= c) {
            passedAt = at;
            break;
          }
        }
      }
      lags.push(passedAt === undefined ? 0 : Math.max(0, s.atMs - passedAt));
    }
  }
  return lags;
}

/** The p-th percentile (0..100) by nearest rank; undefined for no values. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}
