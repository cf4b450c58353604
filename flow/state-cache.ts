/**
 * The worker's bounded state cache (`stateCache.maxKeys`): how many keys all its partitions hold
 * in memory together, when the backend reads any other key from its store on demand (local
 * state: docs/local-state.md). A partition reports its live keys at the end of each batch and
 * persist; while the worker is over the bound, the reporting partition unloads its share of the
 * excess (down to LOW_WATER of the bound) — only keys whose state is in the store, so nothing is
 * lost and the committed offset rules stay as they are (kf: persist-plan's unload path).
 */
const LOW_WATER = 0.9;

/** A partition's name in the cache. */
export function cachedPartition(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}

export class StateCache {
  private total = 0;
  /** Live keys by partition (`topic:partition`): a newer engine of a partition replaces the older's count. */
  private readonly counts = new Map<string, number>();

  constructor(readonly maxKeys: number) {
    if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1)) throw new RangeError(`stateCache.maxKeys must be a positive integer, got ${maxKeys}`);
  }

  /** The live keys of every partition, as last reported. */
  get liveKeys(): number {
    return this.total;
  }

  /**
   * The partition holds `live` keys now: over the bound, it unloads its share of the excess with
   * `unload` (which returns how many keys it unloaded, only those the store holds). Returns that.
   */
  report(partition: string, live: number, unload: (count: number) => number): number {
    this.set(partition, live);
    if (this.total <= this.maxKeys) return 0;
    const excess = this.total - Math.floor(this.maxKeys * LOW_WATER);
    const share = Math.min(live, Math.ceil((excess * live) / this.total));
    if (share <= 0) return 0;
    const unloaded = unload(share);
    this.set(partition, live - unloaded);
    return unloaded;
  }

  /** The partition left this worker: its keys no longer count. */
  forget(partition: string): void {
    this.total -= this.counts.get(partition) ?? 0;
    this.counts.delete(partition);
  }

  private set(partition: string, live: number): void {
    this.total += live - (this.counts.get(partition) ?? 0);
    this.counts.set(partition, live);
  }
}
