/**
 * The worker's bounded state cache (`stateCache: { maxKeys?, maxBytes? }`): how many keys, and how
 * many bytes of them, all its partitions hold in memory together, when the backend reads any other
 * key from its store on demand (local state: docs/local-state.md). A partition reports its live
 * keys and their bytes at the end of each batch and persist; while the worker is over a bound, the
 * reporting partition unloads its share of the excess (down to LOW_WATER of the bound) — only keys
 * whose state is in the store, so nothing is lost and the committed offset rules stay as they are
 * (kf: persist-plan's unload path).
 *
 * A key's bytes are its stored record's size (the snapshot record as written to the snapshot topic
 * or read from the store, compressed if compression is on) plus KEY_BYTES for the key itself: what
 * the worker can know without measuring the heap. A key not written yet counts KEY_BYTES.
 */
const LOW_WATER = 0.9;

/** The heap a small key costs besides its state (bench:memory's bytes_per_key_heap: 198). */
export const KEY_BYTES = 200;

/** Keys and bytes: a bound, a partition's share of the excess, or what was unloaded. */
export interface Unloaded {
  readonly keys: number;
  readonly bytes: number;
}

export interface StateCacheBounds {
  readonly maxKeys?: number;
  readonly maxBytes?: number;
}

/** A partition's name in the cache. */
export function cachedPartition(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}

export class StateCache {
  readonly maxKeys: number;
  readonly maxBytes: number;
  private totalKeys = 0;
  private totalBytes = 0;
  /** Live keys and bytes by partition (`topic:partition`): a newer engine of a partition replaces the older's. */
  private readonly parts = new Map<string, { keys: number; bytes: number }>();

  constructor(bounds: StateCacheBounds) {
    const { maxKeys, maxBytes } = bounds;
    if (maxKeys === undefined && maxBytes === undefined) throw new RangeError('stateCache needs maxKeys, maxBytes or both');
    if (maxKeys !== undefined && !(Number.isSafeInteger(maxKeys) && maxKeys >= 1)) throw new RangeError(`stateCache.maxKeys must be a positive integer, got ${maxKeys}`);
    if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes >= KEY_BYTES)) {
      throw new RangeError(`stateCache.maxBytes must be an integer of at least ${KEY_BYTES} (one key), got ${maxBytes}`);
    }
    this.maxKeys = maxKeys ?? Number.POSITIVE_INFINITY;
    this.maxBytes = maxBytes ?? Number.POSITIVE_INFINITY;
  }

  /** The live keys of every partition, as last reported. */
  get liveKeys(): number {
    return this.totalKeys;
  }

  /** The live keys' bytes of every partition, as last reported. */
  get liveBytes(): number {
    return this.totalBytes;
  }

  /**
   * The partition holds `live` keys of `bytes` now: over a bound, it unloads its share of the
   * excess with `unload` (which returns what it unloaded, only keys the store holds). Returns that.
   */
  report(partition: string, live: Unloaded, unload: (want: Unloaded) => Unloaded): Unloaded {
    this.set(partition, live.keys, live.bytes);
    const overKeys = this.totalKeys > this.maxKeys;
    const overBytes = this.totalBytes > this.maxBytes;
    if (!overKeys && !overBytes) return { keys: 0, bytes: 0 };
    const want = {
      keys: overKeys ? share(this.totalKeys - Math.floor(this.maxKeys * LOW_WATER), live.keys, this.totalKeys) : 0,
      bytes: overBytes ? share(this.totalBytes - Math.floor(this.maxBytes * LOW_WATER), live.bytes, this.totalBytes) : 0,
    };
    if (want.keys <= 0 && want.bytes <= 0) return { keys: 0, bytes: 0 };
    const unloaded = unload(want);
    this.set(partition, live.keys - unloaded.keys, live.bytes - unloaded.bytes);
    return unloaded;
  }

  /** The partition left this worker: its keys no longer count. */
  forget(partition: string): void {
    const part = this.parts.get(partition);
    if (part === undefined) return;
    this.totalKeys -= part.keys;
    this.totalBytes -= part.bytes;
    this.parts.delete(partition);
  }

  private set(partition: string, keys: number, bytes: number): void {
    const part = this.parts.get(partition);
    this.totalKeys += keys - (part?.keys ?? 0);
    this.totalBytes += bytes - (part?.bytes ?? 0);
    if (part) {
      part.keys = keys;
      part.bytes = bytes;
    } else {
      this.parts.set(partition, { keys, bytes });
    }
  }
}

/** A partition's share of `excess`, by its part of the total, and never more than its part. */
function share(excess: number, mine: number, total: number): number {
  if (excess <= 0 || total <= 0) return 0;
  return Math.min(mine, Math.ceil((excess * mine) / total));
}
