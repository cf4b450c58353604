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

  constructor(readonly epoch: number) {}

  /** Everything before `hold` is persisted for this key, as of `now`. */
  markPersisted(kf: KeyFlow<S, V>, now: number, hold: number): void {
    kf.holding = hold;
    kf.flushedClock = now - this.epoch;
  }

  /** Unloads a key from memory (remembered as unloaded if the store has its state). */
  evict(kf: KeyFlow<S, V>): void {
    kf.holding = undefined;
    this.live.delete(kf.key);
    if (kf.stored) this.unloaded.add(kf.key);
  }

  /** The offset safe to commit: the smallest offset a key holds, or `next` when no key holds. */
  committable(next: number): number {
    let min = Number.POSITIVE_INFINITY;
    for (const kf of this.live.values()) if (kf.holding !== undefined && kf.holding < min) min = kf.holding;
    return min === Number.POSITIVE_INFINITY ? next : min;
  }
}
