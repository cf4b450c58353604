/**
 * The key timers of keys out of memory (a bounded state cache: docs/design.md, "Key timers of keys
 * out of memory"). Such keys' timers are in the store, in its due-time index, not in the
 * partition's queues; when a clock reaches them — the processing-time tick, the watermark passing
 * them — the keys due are read back into memory (as a record for them reads them back), their
 * timers join the queues and fire as any key's. `next` remembers, per clock, the earliest due time
 * the store knew of after the last look, so the watermark asks the store only when it passes one;
 * keys leaving memory (their timers become the store's to find) and each tick make it look again.
 */
import type { TimeDomain } from '../core/persistence-types';
import type { PartitionPersistence, RecoveredKey } from './ports';

/** The most keys one look reads back (the rest at the next one: a tick, or the next record). */
export const DUE_READS = 1_000;

export class StoredTimers<S, V> {
  /** Per clock: every key out of memory due by this was read back at the last look (-Infinity: look from the first). */
  private readonly scanned: Record<TimeDomain, number> = { processing: Number.NEGATIVE_INFINITY, event: Number.NEGATIVE_INFINITY };
  /** Per clock: no key out of memory is due before this, as the store said at the last look. */
  private readonly next: Record<TimeDomain, number> = { processing: Number.NEGATIVE_INFINITY, event: Number.NEGATIVE_INFINITY };

  constructor(
    private readonly readDue: NonNullable<PartitionPersistence<S, V>['readDue']>,
    private readonly inMemory: (key: string) => boolean,
    private readonly limit = DUE_READS,
  ) {}

  /**
   * Keys left memory (their timers are the store's to find now, whenever due), or a tick: the next
   * look asks the store, from the first entry, whatever it said before.
   */
  forget(): void {
    this.next.processing = this.next.event = Number.NEGATIVE_INFINITY;
    this.scanned.processing = this.scanned.event = Number.NEGATIVE_INFINITY;
  }

  /** The keys out of memory with a timer of `time` due at `until` (none if the store knew of none). */
  due(time: TimeDomain, until: number): readonly RecoveredKey<S, V>[] {
    if (until < this.next[time]) return [];
    const found = this.readDue({ time, after: this.scanned[time], until, limit: this.limit, inMemory: this.inMemory });
    if (found.keys.length >= this.limit) {
      // More may be due than one look reads: the next look asks again, from where this one started.
      this.next[time] = Number.NEGATIVE_INFINITY;
    } else {
      // Every key out of memory due by `until` is in memory now: entries up to it belong to keys in
      // memory, or to keys that leave it later (forget() then makes the next look start over).
      this.scanned[time] = Math.max(this.scanned[time], until);
      this.next[time] = found.next;
    }
    return found.keys;
  }
}
