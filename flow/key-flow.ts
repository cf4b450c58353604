import type { EmitBuffer } from './emit';
import type { LazySnapshot } from './ports';
import { FoldError } from './errors';
import { discardingContext, type Fold, isPromise } from './fold';
import { offsetFromRecord } from './offsets';
import { appendOutputs, type PendingOutput } from '../core/emitted-outputs';
import type { KeyTimer, TimeDomain } from '../core/persistence-types';
import type { FlowRecord, InputMessage } from './record';
import type { KeyTimes } from './timers';

const STORED = 1;
const DUE = 2;
const UNLOAD = 4;
/** Changed since its last successful write. */
const DIRTY = 8;
/** Changed since the write now in flight was planned. */
const CHANGED = 16;
/** Has extras (in `extrasOf`). */
const EXTRAS = 32;
/** Recovered with a snapshot not decoded yet: `v` holds the LazySnapshot. */
const LAZY = 64;
/** What is stored for the key is its delete marker (written here, or recovered). */
const MARKER = 128;
/**
 * The bits above the flags hold the size in bytes of the key's stored record (`storedSize`),
 * capped at SIZE_MAX: a field of its own would cost every key 8 bytes (bench:memory).
 */
const SIZE_SHIFT = 8;
const SIZE_MAX = (1 << (31 - SIZE_SHIFT)) - 1;
const FLAG_BITS = (1 << SIZE_SHIFT) - 1;

/** The extras of the keys that have any, off the key objects (most keys have none: see KeyExtras). */
const extrasOf = new WeakMap<object, KeyExtras<unknown>>();

/** A record waiting for its key: behind an async fold of an earlier record, or the key's read-back. */
export interface QueuedRecord<V> {
  readonly record: FlowRecord<V>;
  readonly offset: number;
  /** The record as it came (a dead letter carries it). */
  readonly message: InputMessage;
  /** Set for a record whose value could not be decoded (it goes to the poison handler in its turn). */
  readonly decodeError?: unknown;
  /** Event time (key timers in use): the partition's watermark when the record came; the key's event timers at or before it fire before it folds. */
  readonly watermark?: number;
}

/**
 * A key timer due while its key is busy: it fires in the key's turn, after the records queued before
 * it and before those after (as it would have, folding synchronously). `until`: the clock reading it
 * came due at — a timer the records before it moved stays due if it is still at or before that.
 */
export interface QueuedFire {
  readonly fire: { readonly name: string; readonly time: TimeDomain; readonly until: number };
}

/** What waits in a busy key's queue. */
export type Queued<V> = QueuedRecord<V> | QueuedFire;

/**
 * What few keys need, kept out of KeyFlow so that a plain key stays small (the memory figure of
 * bench:memory is per live key): journal events, pending outputs, and while the key folds
 * asynchronously (or is read back), its waiting records and its own fold context.
 */
export interface KeyExtras<V> {
  /** Records folded since the last successful write, for the journal (journal modes only). */
  events?: FlowRecord<V>[];
  /** Records to produce with the key's next write (dead letters and emitted records). */
  outputs?: PendingOutput[];
  /** Records (and timer fires) waiting for this key, in order; set while the key is busy (an async fold or a read-back runs). */
  queue?: Queued<V>[];
  /** The fold context of this key's async folds (its emits must not mix with another key's). */
  emits?: EmitBuffer;
  /**
   * While busy: the offset of the record folding now (or first to fold) — a write of the key's
   * state meanwhile covers the records before it, so the key holds it. Undefined while it is read back.
   */
  at?: number;
}

/**
 * One key of a partition: its state, the offset of the last record folded into it, the offset it
 * holds back from commit, and its timer. PartitionFlow folds records into it; a key is `busy`
 * while an async fold (or its read-back) runs, and its later records wait in its queue.
 *
 * Holding: a live key always holds the earliest offset whose effect on it may not be persisted —
 * its first record's offset when new, the partition's committed offset when recovered, the
 * partition's next offset as of its last successful persist afterwards.
 *
 * Small on purpose (one object per live key, no sub-objects on the common path): clocks are
 * relative to the partition's epoch (small integers, not boxed doubles), booleans share one
 * bit field, and everything rare lives in `x`, kept off the object (a WeakMap entry a bit marks).
 */
export class KeyFlow<S, V> implements KeyTimes {
  /** The state; while LAZY, the recovered snapshot it is decoded from when first read. */
  private v: S | LazySnapshot<S> | undefined = undefined;
  /** Offset of the last record applied; records at or below it are skipped (already applied). */
  lastOffset = -1;
  holding: number | undefined;
  private flags = 0;
  /** When (partition clock) and at which offset it last processed a record, or was created: kafka-flow's processedAt ?? createdAt. */
  touchedClock: number;
  touchedOffset: number;
  /** When it was last persisted, or created: kafka-flow's persistedAt ?? createdAt. */
  flushedClock: number;
  /** When its timer fires next (partition clock); undefined: no timer. */
  timerAt: number | undefined = undefined;
  /**
   * Its pending key timers (ctx.timers, stateTtl): part of its state, written with it; never changed
   * in place. A field of its own rather than an extra: in a flow with timers most keys have one
   * (an extra costs an object and a WeakMap entry each, ≈ 100 bytes more per key, and a lookup per fire).
   */
  timers: readonly KeyTimer[] | undefined = undefined;

  /**
   * @param clock  the partition clock when the key was created (or recovered)
   * @param offset the offset it holds from: its first record's, or the committed offset at recovery
   */
  constructor(
    readonly key: string,
    clock: number,
    offset: number,
    journaling: boolean,
  ) {
    this.holding = offset;
    this.touchedClock = clock;
    this.touchedOffset = offset;
    this.flushedClock = clock;
    if (journaling) this.extras().events = [];
  }

  /**
   * The key's state (undefined: deleted, or never folded). A key recovered with a lazy snapshot
   * decodes it here on first read, which throws CorruptSnapshotError if its bytes do not decode.
   */
  get state(): S | undefined {
    if ((this.flags & LAZY) !== 0) this.decode();
    return this.v as S | undefined;
  }
  set state(state: S | undefined) {
    this.flags &= ~LAZY;
    this.v = state;
  }

  /** It has a state, decoded or not (reading this never decodes). */
  get hasState(): boolean {
    return this.v !== undefined;
  }

  /** Recovered with a snapshot that is not decoded yet. */
  get lazy(): boolean {
    return (this.flags & LAZY) !== 0;
  }

  /** Takes a recovered snapshot without decoding it: its state is decoded when first read. */
  restoreLazy(snapshot: LazySnapshot<S>): void {
    this.v = snapshot;
    this.flags |= LAZY;
    this.lastOffset = snapshot.offset;
  }

  /** Decodes a lazily recovered state now; throws (CorruptSnapshotError) leaving it undecoded. */
  decode(): void {
    if ((this.flags & LAZY) === 0) return;
    const state = (this.v as LazySnapshot<S>).state;
    this.v = state;
    this.flags &= ~LAZY;
  }

  /** Journal events, outputs, and the queue of a busy key; undefined for most keys. */
  get x(): KeyExtras<V> | undefined {
    return (this.flags & EXTRAS) === 0 ? undefined : (extrasOf.get(this) as KeyExtras<V>);
  }

  /** Its extras, made on first use. */
  extras(): KeyExtras<V> {
    let x = this.x;
    if (x === undefined) {
      x = {};
      extrasOf.set(this, x as KeyExtras<unknown>);
      this.flags |= EXTRAS;
    }
    return x;
  }

  /** Drops the extras once nothing is left in them (a key that folded asynchronously once stays small). */
  tidy(): void {
    const x = this.x;
    if (
      x &&
      x.events === undefined &&
      (x.outputs === undefined || x.outputs.length === 0) &&
      x.queue === undefined &&
      x.emits === undefined
    ) {
      extrasOf.delete(this);
      this.flags &= ~EXTRAS;
    }
  }

  /**
   * The size in bytes of the key's record as last written or read, where the backend reports it
   * (0: unknown, or nothing written yet); capped at 8 MiB - 1. A byte-bounded state cache counts it.
   */
  get storedSize(): number {
    return this.flags >>> SIZE_SHIFT;
  }
  set storedSize(bytes: number) {
    this.flags = (this.flags & FLAG_BITS) | (Math.min(Math.max(0, Math.floor(bytes)), SIZE_MAX) << SIZE_SHIFT);
  }

  /** Something is stored for this key (snapshot, journal or key entry), so a delete must be written. */
  get stored(): boolean {
    return (this.flags & STORED) !== 0;
  }
  set stored(v: boolean) {
    this.flags = v ? this.flags | STORED : this.flags & ~STORED;
  }

  /**
   * What is stored for this key is its delete marker. A key written again after its marker is
   * listed again in a key table: another engine of the partition (a stale owner, or an earlier
   * engine of this process) may have purged the marker and unlisted the key meanwhile.
   */
  get storedMarker(): boolean {
    return (this.flags & MARKER) !== 0;
  }
  set storedMarker(v: boolean) {
    this.flags = v ? this.flags | MARKER : this.flags & ~MARKER;
  }

  /** Marked by a timer (or pending outputs): persist at the next persist. */
  get due(): boolean {
    return (this.flags & DUE) !== 0;
  }
  set due(v: boolean) {
    this.flags = v ? this.flags | DUE : this.flags & ~DUE;
  }

  /** Marked by a timer: unload once persisted. */
  get unload(): boolean {
    return (this.flags & UNLOAD) !== 0;
  }
  set unload(v: boolean) {
    this.flags = v ? this.flags | UNLOAD : this.flags & ~UNLOAD;
  }

  /** Its state changed since its last successful write, or it has journal events to write. */
  get dirty(): boolean {
    return (this.flags & DIRTY) !== 0 || (this.x?.events !== undefined && this.x.events.length > 0);
  }

  /** Its state changed since `beginWrite` (the write in flight does not carry the change). */
  get changedSinceWrite(): boolean {
    return (this.flags & CHANGED) !== 0;
  }

  /** An async fold or a read-back runs for it: its records wait in `x.queue`. */
  get busy(): boolean {
    return this.x?.queue !== undefined;
  }

  /** Any change counts, even one undone later: a key created and deleted between two persists still needs its delete marker. */
  markChanged(): void {
    this.flags |= DIRTY | CHANGED;
  }

  /** A write of its current state is planned (at most one is in flight per key). */
  beginWrite(): void {
    this.flags &= ~CHANGED;
  }

  /** Its current state is what the store holds. */
  markClean(): void {
    this.flags &= ~(DIRTY | CHANGED);
  }

  get events(): FlowRecord<V>[] | undefined {
    return this.x?.events;
  }
  set events(events: FlowRecord<V>[] | undefined) {
    if (events !== undefined) this.extras().events = events;
    else if (this.x) this.x.events = undefined;
  }

  get outputs(): PendingOutput[] | undefined {
    return this.x?.outputs;
  }
  set outputs(outputs: PendingOutput[] | undefined) {
    if (outputs !== undefined) this.extras().outputs = outputs;
    else if (this.x) this.x.outputs = undefined;
  }

  /** Adds records to produce with the key's next write; the key is then due at the next persist. */
  addOutputs(outputs: readonly PendingOutput[]): void {
    const x = this.extras();
    // Copied (a fold context reuses what it hands out); emitted bytes join the key's last run.
    x.outputs = appendOutputs(x.outputs, outputs);
    this.due = true;
  }

  /**
   * Restores state by replaying journal events through the fold (journal mode recovery). Runs
   * apart from the queue, which may already hold this batch's records for the key.
   */
  replay(fold: Fold<S, V>, events: readonly FlowRecord<V>[]): void | Promise<void> {
    let state = this.state;
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const offset = offsetFromRecord(event.offset);
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
    this.lastOffset = offsetFromRecord(event.offset);
    await this.replay(fold, events.slice(index + 1));
  }

  private markRestored(): void {
    this.stored = true;
    this.markClean();
  }
}

