import type { KeyFlow } from './key-flow';

/**
 * A partition's keys in memory, shared by its fold (PartitionFlow) and its persists
 * (PartitionPersister): the live keys, the keys unloaded with state in the store (read back when a
 * record comes for them), and the keys with a write in flight. Key clocks are relative to `epoch`
 * (small integers, not boxed doubles).
 */
export class PartitionKeys<S, V> {
  readonly live = new Map<string, KeyFlow<S, V>>();
  /** Keys unloaded from memory with state in the store: read again when a record comes for them. */
  readonly unloaded = new Set<string>();
  /** Keys with a write in flight: if they finish meanwhile, their stored state must still be deleted. */
  readonly writing = new Set<KeyFlow<S, V>>();
  /**
   * The store finds the keys whose timers come due (its due-time index, stored-timers.ts): a key
   * with pending timers may leave memory too. Otherwise such a key stays (its timers are the partition's).
   */
  timersInStore = false;

  /**
   * @param epoch    key clocks are relative to it
   * @param onDemand the store answers for every key with state (a bounded state cache): an
   *                 unloaded key is not remembered, a record for a key not in memory asks the store
   */
  constructor(
    readonly epoch: number,
    readonly onDemand = false,
  ) {}

  /** Everything before `hold` is persisted for this key, as of `now`. */
  markPersisted(kf: KeyFlow<S, V>, now: number, hold: number): void {
    kf.holding = hold;
    kf.flushedClock = now - this.epoch;
  }

  /** Unloads a key from memory (remembered as unloaded if the store has its state). */
  evict(kf: KeyFlow<S, V>): void {
    kf.holding = undefined;
    this.live.delete(kf.key);
    if (kf.stored && !this.onDemand) this.unloaded.add(kf.key);
  }

  /**
   * Unloads up to `count` keys whose state the store holds as it is in memory (not changed since
   * their last write, no write in flight, not busy, no outputs waiting, no timers unless the store finds them), least recently
   * touched first, roughly: scanning from the oldest, a key touched at or after `recentSince` (or
   * not unloadable now) is moved to the back for a second chance. Returns how many it unloaded.
   */
  unloadClean(count: number, recentSince: number): number {
    let unloaded = this.unloadPass(count, recentSince);
    // Not enough keys untouched since then: any unloadable key goes.
    if (unloaded < count) unloaded += this.unloadPass(count - unloaded, Number.POSITIVE_INFINITY);
    return unloaded;
  }

  private unloadPass(count: number, recentSince: number): number {
    let unloaded = 0;
    let scanned = 0;
    const limit = this.live.size;
    for (const kf of this.live.values()) {
      if (unloaded >= count || scanned++ >= limit) break;
      if (kf.touchedClock < recentSince && this.unloadable(kf)) {
        this.evict(kf);
        unloaded++;
      } else {
        // Second chance: to the back (a Map iterates in insertion order).
        this.live.delete(kf.key);
        this.live.set(kf.key, kf);
      }
    }
    return unloaded;
  }

  private unloadable(kf: KeyFlow<S, V>): boolean {
    return (
      kf.stored && kf.hasState && !kf.dirty && !kf.busy && !this.writing.has(kf) && (kf.timers === undefined || this.timersInStore) && (kf.outputs === undefined || kf.outputs.length === 0)
    );
  }

  /** The offset safe to commit: the smallest offset a key holds, or `next` when no key holds. */
  committable(next: number): number {
    let min = Number.POSITIVE_INFINITY;
    for (const kf of this.live.values()) if (kf.holding !== undefined && kf.holding < min) min = kf.holding;
    return min === Number.POSITIVE_INFINITY ? next : min;
  }
}
