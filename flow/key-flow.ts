import { EmitBuffer, type OutputOptions } from './emit';
import { FoldError } from './errors';
import { discardingContext, type Fold, isPromise } from './fold';
import type { OutputRecord, PoisonReason } from './poison';
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
  /** Records to produce with the key's next write (dead letters and emitted records). */
  outputs: OutputRecord[] | undefined;
  /** The fold context (ctx.emit) of this key's records, made on the first fold. */
  private emits: EmitBuffer | undefined;
  /** Queued records whose value could not be decoded, by offset (handed to the poison handler in order). */
  poisoned: Map<number, unknown> | undefined;

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

  /** Queues a record whose value could not be decoded: the poison handler gets it in its turn. */
  enqueuePoisoned(record: FlowRecord<V>, offset: number, error: unknown): void {
    this.poisoned ??= new Map();
    this.poisoned.set(offset, error);
    this.enqueue(record, offset);
  }

  /**
   * Folds the queued records into the state and returns how many were applied (the others were at
   * or below `lastOffset`). Stays synchronous unless the fold returns a Promise. Without `poison`,
   * a fold that throws fails with FoldError; with it, the handler decides (it throws to fail).
   */
  foldQueued(fold: Fold<S, V>, now: number, poison?: PoisonHandler<S, V>, outputs?: OutputOptions): number | Promise<number> {
    this.poison = poison;
    this.emits ??= new EmitBuffer(outputs);
    return this.foldFrom(fold, now, 0, 0);
  }

  /** Adds records to produce with the key's next write; the key is then due at the next persist. */
  addOutputs(outputs: readonly OutputRecord[]): void {
    if (this.outputs) this.outputs.push(...outputs);
    else this.outputs = outputs.slice();
    this.due = true;
  }

  private poison: PoisonHandler<S, V> | undefined;

  /** A poisoned record (undecodable, or the fold threw): the handler skips it, dead-letters it, or throws. */
  private onPoison(record: FlowRecord<V>, offset: number, reason: PoisonReason, error: unknown): boolean {
    const handler = this.poison;
    if (!handler) {
      this.abandonQueue();
      throw reason === 'fold' ? new FoldError(record.topic, record.partition, record.key, record.offset, error) : error;
    }
    let outcome: 'skipped' | 'dead-lettered';
    try {
      outcome = handler(this, record, reason, error);
    } catch (err) {
      this.abandonQueue();
      throw err;
    }
    this.lastOffset = offset; // taken: a replay of this key skips it
    return outcome === 'dead-lettered';
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
        // Its outputs went out with the write that journaled it: a replay emits nothing.
        next = fold(state, event, discardingContext);
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
    const ctx = this.emits!;
    let state = this.state;
    // Any change counts, even one undone within the batch: a key created and deleted between two
    // persists still needs its delete marker (a replay from its middle would differ).
    let changed = false;
    for (let i = from; i < records.length; i++) {
      const offset = offsets[i]!;
      if (offset <= this.lastOffset) continue;
      const record = records[i]!;
      if (this.poisoned?.has(offset)) {
        if (this.onPoison(record, offset, 'decode', this.poisoned.get(offset))) changed = true;
        continue;
      }
      let next: S | undefined | Promise<S | undefined>;
      ctx.begin(record);
      try {
        next = fold(state, record, ctx);
      } catch (err) {
        ctx.discard(); // a failed record's emits go with it
        this.state = state;
        if (this.onPoison(record, offset, 'fold', err)) changed = true;
        continue;
      }
      if (isPromise(next)) {
        if (changed) this.version++;
        this.state = state;
        return this.continueAsync(fold, now, next, i, applied);
      }
      const emitted = ctx.take();
      // A record that emitted is written even if the state is unchanged: the snapshot's offset
      // must pass it, or a replay would emit again.
      if (emitted) {
        this.addOutputs(emitted);
        changed = true;
      }
      if (this.events) this.events.push(record);
      if (next !== state) changed = true;
      state = next;
      this.lastOffset = offset;
      applied++;
    }
    if (changed) this.version++;
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
      this.emits!.discard();
      if (this.onPoison(record, this.queuedOffsets[index]!, 'fold', err)) this.version++;
      return this.foldFrom(fold, now, index + 1, applied);
    }
    const emitted = this.emits!.take();
    if (emitted) this.addOutputs(emitted);
    if (this.events) this.events.push(record);
    if (next !== this.state || emitted) this.version++;
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
    this.poisoned = undefined;
  }

  private abandonQueue(): void {
    this.queued.length = 0;
    this.queuedOffsets.length = 0;
    this.poisoned = undefined;
  }
}

/**
 * Decides about a poisoned record of `key`: returns `skipped` or `dead-lettered` (after adding the
 * dead letter to the key's outputs), or throws to stop the partition.
 */
export type PoisonHandler<S, V> = (key: KeyFlow<S, V>, record: FlowRecord<V>, reason: PoisonReason, error: unknown) => 'skipped' | 'dead-lettered';
