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
  private readonly next: Record<TimeDomain, number> = { processing: Number.NEGATIVE_INFINITY, event: Number.NEGATIVE_INFINITY };

  constructor(
    private readonly readDue: NonNullable<PartitionPersistence<S, V>['readDue']>,
    private readonly inMemory: (key: string) => boolean,
    private readonly limit = DUE_READS,
  ) {}

  /** Keys left memory, or a tick: look again whatever the store said last. */
  forget(): void {
    this.next.processing = this.next.event = Number.NEGATIVE_INFINITY;
  }

  /** The keys out of memory with a timer of `time` due at `until` (none if the store knew of none). */
  due(time: TimeDomain, until: number): readonly RecoveredKey<S, V>[] {
    if (until < this.next[time]) return [];
    const found = this.readDue(time, until, this.limit, this.inMemory);
    // More may be due than one look reads: the next look asks again.
    this.next[time] = found.keys.length >= this.limit ? Number.NEGATIVE_INFINITY : found.next;
    return found.keys;
  }
}
