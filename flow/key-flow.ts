import { FoldError } from './errors';
import { type Fold, isPromise } from './fold';
import type { FlowRecord } from './record';
import type { KeyTimestamps, Timestamp } from './timers';

/**
 * One key of a partition: its state, the offset of the last record folded into it, the offset it
 * holds back from commit, and its timers. Records are queued with `enqueue` while a batch is routed
 * and folded with `foldQueued`, in offset order.
 *
 * Holding: a live key always holds the earliest offset whose effect on it may not be persisted —
 * its first record's offset when new, the partition's committed offset when recovered, the
 * partition's next offset as of its last successful persist afterwards.
 */
export class KeyFlow<S, V> implements KeyTimestamps {
  state: S | undefined = undefined;
  /** Offset of the last record applied; records at or below it are skipped (already applied). */
  lastOffset = -1;
  /** Bumped whenever the state changes; persisted when it equals `persistedVersion`. */
  version = 0;
  persistedVersion = 0;
  /** Something is stored for this key (snapshot, journal or key entry), so a delete must be written. */
  stored = false;
  holding: number | undefined;

  readonly createdAt: Timestamp;
  persistedAt: Timestamp | undefined = undefined;
  processedAt: Timestamp | undefined = undefined;
  /** Registered timer instants (kafka-flow keeps a set; a handful at most). */
  timers: number[] = [];
  /** Marked by a timer: persist at the next persist, then unload if `unload`. */
  due = false;
  unload = false;

  /** Records folded since the last successful write, for the journal (journal modes only). */
  events: FlowRecord<V>[] | undefined;

  /** This batch's records for the key (reused between batches to spare allocations). */
  readonly queued: FlowRecord<V>[] = [];
  readonly queuedOffsets: number[] = [];

  constructor(
    readonly key: string,
    createdAt: Timestamp,
    journaling: boolean,
  ) {
    this.createdAt = createdAt;
    this.holding = createdAt.offset;
    if (journaling) this.events = [];
  }

  get dirty(): boolean {
    return this.version !== this.persistedVersion || (this.events !== undefined && this.events.length > 0);
  }

  enqueue(record: FlowRecord<V>, offset: number): void {
    this.queued.push(record);
    this.queuedOffsets.push(offset);
  }

  /**
   * Folds the queued records into the state and returns how many were applied (the others were at
   * or below `lastOffset`). Stays synchronous unless the fold returns a Promise.
   */
  foldQueued(fold: Fold<S, V>, now: number): number | Promise<number> {
    return this.foldFrom(fold, now, 0, 0);
  }

  /**
   * Restores state by replaying journal events through the fold (journal mode recovery). Runs
   * apart from the queue, which may already hold this batch's records for the key.
   */
  replay(fold: Fold<S, V>, events: readonly FlowRecord<V>[]): void | Promise<void> {
    let state = this.state;
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const offset = Number(event.offset);
      if (offset <= this.lastOffset) continue;
      let next: S | undefined | Promise<S | undefined>;
      try {
        next = fold(state, event);
      } catch (err) {
        throw new FoldError(event.topic, event.partition, event.key, event.offset, err);
      }
      if (isPromise(next)) {
        this.state = state;
        return this.replayAsync(fold, events, i, next);
      }
      state = next;
      this.lastOffset = offset;
    }
    this.state = state;
    this.markRestored();
  }

  private async replayAsync(fold: Fold<S, V>, events: readonly FlowRecord<V>[], index: number, pending: Promise<S | undefined>): Promise<void> {
    const event = events[index]!;
    try {
      this.state = await pending;
    } catch (err) {
      throw new FoldError(event.topic, event.partition, event.key, event.offset, err);
    }
    this.lastOffset = Number(event.offset);
    await this.replay(fold, events.slice(index + 1));
  }

  private markRestored(): void {
    this.stored = true;
    this.persistedVersion = this.version;
  }

  private foldFrom(fold: Fold<S, V>, now: number | undefined, from: number, applied: number): number | Promise<number> {
    const records = this.queued;
    const offsets = this.queuedOffsets;
    let state = this.state;
    const before = state;
    for (let i = from; i < records.length; i++) {
      const offset = offsets[i]!;
      if (offset <= this.lastOffset) continue;
      const record = records[i]!;
      let next: S | undefined | Promise<S | undefined>;
      try {
        next = fold(state, record);
      } catch (err) {
        this.abandonQueue();
        throw new FoldError(record.topic, record.partition, record.key, record.offset, err);
      }
      if (isPromise(next)) {
        if (state !== before) this.version++;
        this.state = state;
        return this.continueAsync(fold, now, next, i, applied);
      }
      if (this.events) this.events.push(record);
      state = next;
      this.lastOffset = offset;
      applied++;
    }
    if (state !== before) this.version++;
    this.state = state;
    this.finishQueue(now);
    return applied;
  }

  private async continueAsync(
    fold: Fold<S, V>,
    now: number | undefined,
    pending: Promise<S | undefined>,
    index: number,
    applied: number,
  ): Promise<number> {
    const record = this.queued[index]!;
    let next: S | undefined;
    try {
      next = await pending;
    } catch (err) {
      this.abandonQueue();
      throw new FoldError(record.topic, record.partition, record.key, record.offset, err);
    }
    if (this.events) this.events.push(record);
    if (next !== this.state) this.version++;
    this.state = next;
    this.lastOffset = this.queuedOffsets[index]!;
    return this.foldFrom(fold, now, index + 1, applied + 1);
  }

  private finishQueue(now: number | undefined): void {
    const n = this.queuedOffsets.length;
    if (now !== undefined && n > 0) {
      // Updated in place: this runs for every key of every batch.
      const p = this.processedAt as { clock: number; offset: number } | undefined;
      if (p) {
        p.clock = now;
        p.offset = this.queuedOffsets[n - 1]!;
      } else {
        this.processedAt = { clock: now, offset: this.queuedOffsets[n - 1]! };
      }
    }
    this.queued.length = 0;
    this.queuedOffsets.length = 0;
  }

  private abandonQueue(): void {
    this.queued.length = 0;
    this.queuedOffsets.length = 0;
  }
}
