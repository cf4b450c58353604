import type { KeyFlow } from './key-flow';
import { KEY_BYTES, type Unloaded } from './state-cache';

/**
 * The live keys by name, with the sum of their stored sizes kept as keys come and go (every site
 * that adds or drops a key goes through set/delete, so the sum cannot drift).
 */
export class LiveKeys<S, V> extends Map<string, KeyFlow<S, V>> {
  /** The stored sizes (KeyFlow.storedSize) of the keys in the map, summed. */
  storedBytes = 0;

  override set(key: string, kf: KeyFlow<S, V>): this {
    const before = super.get(key);
    if (before !== undefined) this.storedBytes -= before.storedSize;
    this.storedBytes += kf.storedSize;
    return super.set(key, kf);
  }

  override delete(key: string): boolean {
    const before = super.get(key);
    if (before === undefined) return false;
    this.storedBytes -= before.storedSize;
    return super.delete(key);
  }

  override clear(): void {
    this.storedBytes = 0;
    super.clear();
  }

  /** The bytes the state cache counts for these keys: their stored sizes plus KEY_BYTES each. */
  get bytes(): number {
    return this.storedBytes + this.size * KEY_BYTES;
  }
}

/**
 * A partition's keys in memory, shared by its fold (PartitionFlow) and its persists
 * (PartitionPersister): the live keys, the keys unloaded with state in the store (read back when a
 * record comes for them), and the keys with a write in flight. Key clocks are relative to `epoch`
 * (small integers, not boxed doubles).
 */
export class PartitionKeys<S, V> {
  readonly live = new LiveKeys<S, V>();
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

  /** The key's record is `bytes` long in the store now (a write landed, or it was read). */
  resize(kf: KeyFlow<S, V>, bytes: number): void {
    const live = this.live.get(kf.key) === kf;
    if (live) this.live.storedBytes -= kf.storedSize;
    kf.storedSize = bytes;
    if (live) this.live.storedBytes += kf.storedSize;
  }

  /** Unloads a key from memory (remembered as unloaded if the store has its state). */
  evict(kf: KeyFlow<S, V>): void {
    kf.holding = undefined;
    this.live.delete(kf.key);
    if (kf.stored && !this.onDemand) this.unloaded.add(kf.key);
  }

  /**
   * Unloads keys whose state the store holds as it is in memory (not changed since their last
   * write, no write in flight, not busy, no outputs waiting, no timers unless the store finds them)
   * until at least `want.keys` keys and `want.bytes` bytes (as LiveKeys.bytes counts them) are out,
   * or none is left to unload: first those not touched since `recentSince` (scanning from the
   * map's oldest, a key touched since, or not unloadable now, is moved to the back for a second
   * chance), then the least recently touched of the others. Returns what it unloaded.
   */
  unloadClean(want: Unloaded, recentSince: number): Unloaded {
    const done = { keys: 0, bytes: 0 };
    this.unloadPass(want, done, recentSince);
    // Not enough keys untouched since then: the least recently touched unloadable keys go.
    if (!enough(done, want)) this.unloadOldest(want, done);
    return done;
  }

  /**
   * Unloads unloadable keys least recently touched first (by clock, then offset) until `want` is
   * met. Not in the map's order: keys touched often keep their old place in it (a second chance
   * moves them back together), so under skewed keys the map's oldest are often the hottest.
   */
  private unloadOldest(want: Unloaded, done: { keys: number; bytes: number }): void {
    const candidates: KeyFlow<S, V>[] = [];
    for (const kf of this.live.values()) if (this.unloadable(kf)) candidates.push(kf);
    candidates.sort((a, b) => a.touchedClock - b.touchedClock || a.touchedOffset - b.touchedOffset);
    for (const kf of candidates) {
      if (enough(done, want)) break;
      done.bytes += kf.storedSize + KEY_BYTES;
      done.keys++;
      this.evict(kf);
    }
  }

  private unloadPass(want: Unloaded, done: { keys: number; bytes: number }, recentSince: number): void {
    let scanned = 0;
    const limit = this.live.size;
    for (const kf of this.live.values()) {
      if (enough(done, want) || scanned++ >= limit) break;
      if (kf.touchedClock < recentSince && this.unloadable(kf)) {
        done.bytes += kf.storedSize + KEY_BYTES;
        done.keys++;
        this.evict(kf);
      } else {
        // Second chance: to the back (a Map iterates in insertion order).
        this.live.delete(kf.key);
        this.live.set(kf.key, kf);
      }
    }
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

function enough(done: Unloaded, want: Unloaded): boolean {
  return done.keys >= want.keys && done.bytes >= want.bytes;
}
