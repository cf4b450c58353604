/**
 * Per-key timers (ctx.timers) and state TTL: what a fold may set on its key, and the edits one fold
 * makes, held until it succeeds (a fold that throws takes its timer edits with it, as its emits).
 * Timers belong to the key's persisted state (Snapshot.timers): they survive restarts and
 * rebalances with it, and a fire lands with the key's next write.
 */
import type { KeyTimer, TimeDomain } from '../core/persistence-types';
import { KafkaFlowError } from '../config/errors';
import { PartitionStateError } from './errors';

export type { KeyTimer, TimeDomain };

/** A timer's options: its name (default: its time, so unnamed timers at different times coexist) and clock. */
export interface TimerOptions {
  readonly name?: string;
  /** Default 'processing'. */
  readonly time?: TimeDomain;
}

/** `ctx.timers`: the timers of the key being folded (or fired). */
export interface KeyTimers {
  /** Fires at `epochMs` (ms since the epoch) on its clock; a timer of the same name is replaced. */
  at(epochMs: number, options?: TimerOptions): void;
  /** Cancels the key's timer of this name (nothing if it has none). */
  cancel(name: string): void;
  /** The key's pending timers, as the edits so far leave them. */
  list(): readonly KeyTimer[];
}

/** The timer stateTtl keeps on each key: reserved, never shown to onTimer. */
export const TTL_TIMER = 'kafka-flow:ttl';
const RESERVED = 'kafka-flow:';

/** The most timers a key may have pending (a guard against a fold that sets one per record). */
export const MAX_TIMERS_PER_KEY = 1000;

/**
 * A timer set with a bad time or name, or one too many: thrown inside the fold, so the fold-failure
 * policy applies. Typed so that its message, which holds nothing of the record, shows without logKeys.
 */
export class TimerArgumentError extends KafkaFlowError {
  constructor(message: string) {
    super('TIMER_ARGUMENT', message);
  }
}

/** A fold's edit of its key's timers: the key's timers after it (undefined: none left). No edit at all is `undefined` in its place. */
export interface TimerEdit {
  readonly timers: readonly KeyTimer[] | undefined;
}

/**
 * The key's timers with `timer` in place of any of the same name (a new array; timers are never
 * changed in place). Arrays of exactly their length: a key's timers live as long as the key.
 */
export function withTimer(timers: readonly KeyTimer[] | undefined, timer: KeyTimer): readonly KeyTimer[] {
  if (timers === undefined || timers.length === 0) return [timer];
  for (let i = 0; i < timers.length; i++) {
    if (timers[i]!.name === timer.name) {
      const out = timers.slice();
      out[i] = timer;
      return out;
    }
  }
  return timers.concat([timer]);
}

/** The key's timers without the one named `name` (undefined when none is left). */
export function withoutTimer(timers: readonly KeyTimer[] | undefined, name: string): readonly KeyTimer[] | undefined {
  if (!timers) return undefined;
  if (timers.length === 1) return timers[0]!.name === name ? undefined : timers;
  const kept = timers.filter((t) => t.name !== name);
  return kept.length === 0 ? undefined : kept;
}

/**
 * One fold's timer edits on its key: `begin` with the key's timers, the fold calls `at`/`cancel`,
 * `take` hands the key's timers after the fold (undefined: unchanged) and closes until the next
 * begin; `discard` drops the edits.
 */
export class TimerEdits implements KeyTimers {
  private after: readonly KeyTimer[] | undefined;
  private edited = false;
  private open = false;

  begin(timers: readonly KeyTimer[] | undefined): void {
    this.after = timers;
    this.edited = false;
    this.open = true;
  }

  at(epochMs: number, options?: TimerOptions): void {
    this.check('at');
    if (typeof epochMs !== 'number' || !Number.isFinite(epochMs)) throw new TimerArgumentError(`ctx.timers.at: the time must be a finite number of ms since the epoch, got ${String(epochMs)}`);
    const name = options?.name ?? String(epochMs);
    if (typeof name !== 'string' || name.length === 0) throw new TimerArgumentError('ctx.timers.at: a timer name must be a non-empty string');
    if (name.startsWith(RESERVED)) throw new TimerArgumentError(`ctx.timers.at: timer names starting with "${RESERVED}" are reserved`);
    const time = options?.time ?? 'processing';
    if (time !== 'processing' && time !== 'event') throw new TimerArgumentError(`ctx.timers.at: time must be 'processing' or 'event', got ${String(time)}`);
    const next = withTimer(this.after, { name, at: Math.floor(epochMs), time });
    if (next.filter((t) => t.name !== TTL_TIMER).length > MAX_TIMERS_PER_KEY) {
      throw new TimerArgumentError(`ctx.timers.at: a key may have at most ${MAX_TIMERS_PER_KEY} pending timers`);
    }
    this.after = next;
    this.edited = true;
  }

  cancel(name: string): void {
    this.check('cancel');
    if (name.startsWith(RESERVED)) return;
    if (!this.after?.some((t) => t.name === name)) return;
    this.after = withoutTimer(this.after, name);
    this.edited = true;
  }

  list(): readonly KeyTimer[] {
    this.check('list');
    return (this.after ?? []).filter((t) => t.name !== TTL_TIMER);
  }

  /** The key's timers after the fold, or undefined if it changed none; closes the edits. */
  take(): TimerEdit | undefined {
    this.open = false;
    if (!this.edited) return undefined;
    const timers = this.after && this.after.length > 0 ? this.after : undefined;
    this.after = undefined;
    this.edited = false;
    return { timers };
  }

  discard(): void {
    this.open = false;
    this.after = undefined;
    this.edited = false;
  }

  private check(what: string): void {
    if (!this.open) throw new PartitionStateError(`ctx.timers.${what} was called after the fold of its record had finished`);
  }
}
