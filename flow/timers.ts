import { type Duration, toMillis } from '../core/duration';

/**
 * kafka-flow's TimerFlowOf.persistPeriodically: every `fireEvery` a key checks whether
 * `persistEvery` has passed since it was last persisted (or created), and if so is persisted and
 * holds the current offset. Defaults are kafka-flow's.
 */
export interface PersistPeriodicallyOptions {
  fireEvery?: Duration;
  persistEvery?: Duration;
  /** Persist every key when the partition is revoked. */
  flushOnRevoke?: boolean;
  /** Log and count a failed persist (the key keeps holding its old offset) instead of failing. */
  ignorePersistErrors?: boolean;
}

/**
 * kafka-flow's TimerFlowOf.unloadOrphaned: every `fireEvery` a key checks whether it was last
 * touched more than `maxIdle` ago or more than `maxOffsetDifference` offsets back; if so it is
 * persisted and unloaded from memory (it is read again if a record for it comes later).
 */
export interface UnloadOrphanedOptions {
  fireEvery?: Duration;
  maxIdle?: Duration;
  maxOffsetDifference?: number;
  flushOnRevoke?: boolean;
}

export interface TimersOptions {
  persistPeriodically?: PersistPeriodicallyOptions;
  unloadOrphaned?: UnloadOrphanedOptions;
}

export const PERSIST_PERIODICALLY_DEFAULTS = {
  fireEvery: 60_000,
  persistEvery: 60_000,
  flushOnRevoke: false,
  ignorePersistErrors: false,
} as const;

export const UNLOAD_ORPHANED_DEFAULTS = {
  fireEvery: 600_000,
  maxIdle: 600_000,
  maxOffsetDifference: 100_000,
  flushOnRevoke: false,
} as const;

/** The timers of a flow, resolved to milliseconds. */
export interface TimerPolicy {
  readonly fireEvery: number;
  /** Persist periodically at this interval; undefined without persistPeriodically. */
  readonly persistEvery: number | undefined;
  /** Unload orphaned keys; undefined without unloadOrphaned. */
  readonly unload: { readonly maxIdle: number; readonly maxOffsetDifference: number } | undefined;
  readonly flushOnRevoke: boolean;
  readonly ignorePersistErrors: boolean;
}

/**
 * Both timers together behave as kafka-flow's persistPeriodicallyAndUnloadOrphaned: one timer at
 * the smaller `fireEvery`, flushing on revoke if either asks to.
 */
export function timerPolicy(options: TimersOptions = {}): TimerPolicy {
  const p = options.persistPeriodically;
  const u = options.unloadOrphaned;
  const pFire = p ? toMillis(p.fireEvery ?? PERSIST_PERIODICALLY_DEFAULTS.fireEvery, 'persistPeriodically.fireEvery') : undefined;
  const uFire = u ? toMillis(u.fireEvery ?? UNLOAD_ORPHANED_DEFAULTS.fireEvery, 'unloadOrphaned.fireEvery') : undefined;
  return {
    fireEvery: Math.min(pFire ?? Number.POSITIVE_INFINITY, uFire ?? Number.POSITIVE_INFINITY),
    persistEvery: p
      ? toMillis(p.persistEvery ?? PERSIST_PERIODICALLY_DEFAULTS.persistEvery, 'persistPeriodically.persistEvery')
      : undefined,
    unload: u
      ? {
          maxIdle: toMillis(u.maxIdle ?? UNLOAD_ORPHANED_DEFAULTS.maxIdle, 'unloadOrphaned.maxIdle'),
          maxOffsetDifference: u.maxOffsetDifference ?? UNLOAD_ORPHANED_DEFAULTS.maxOffsetDifference,
        }
      : undefined,
    flushOnRevoke: (p?.flushOnRevoke ?? false) || (u?.flushOnRevoke ?? false),
    ignorePersistErrors: p?.ignorePersistErrors ?? PERSIST_PERIODICALLY_DEFAULTS.ignorePersistErrors,
  };
}

/**
 * What a key remembers for its timers (kafka-flow's Timestamps, folded to what the timers read):
 * clocks in the partition's own time base (milliseconds since its epoch).
 */
export interface KeyTimes {
  /** When it last processed a record, or was created (kafka-flow: processedAt ?? createdAt). */
  readonly touchedClock: number;
  /** The offset it last processed, or held from when created (kafka-flow: (processedAt ?? createdAt).offset). */
  readonly touchedOffset: number;
  /** When it was last persisted, or created (kafka-flow: persistedAt ?? createdAt). */
  readonly flushedClock: number;
}

export interface TimerDecision {
  /** Persist the key at the next persist. */
  readonly persist: boolean;
  /** Unload the key from memory once persisted. */
  readonly unload: boolean;
  /** When to fire next; undefined when the key is being unloaded (unloadOrphaned alone). */
  readonly registerAt: number | undefined;
}

/** When a new or recovered key's timer first fires (`createdClock`: when it was created). */
export function firstTimerAt(policy: TimerPolicy, createdClock: number): number | undefined {
  return Number.isFinite(policy.fireEvery) ? createdClock + policy.fireEvery : undefined;
}

const KEEP: TimerDecision = Object.freeze({ persist: false, unload: false, registerAt: undefined });

/**
 * kafka-flow's onTimer of the three timer flows, as a decision the partition carries out, at the
 * moment `clock` (same time base as `t`) with the partition at `offset`.
 */
export function onTimer(policy: TimerPolicy, t: KeyTimes, clock: number, offset: number): TimerDecision {
  const { persistEvery, unload, fireEvery } = policy;
  const canUnload =
    unload !== undefined && (clock > t.touchedClock + unload.maxIdle || offset - t.touchedOffset > unload.maxOffsetDifference);
  const canPersist = persistEvery !== undefined && clock >= t.flushedClock + persistEvery;
  if (persistEvery !== undefined) {
    return { persist: canPersist || canUnload, unload: canUnload, registerAt: clock + fireEvery };
  }
  if (canUnload) return { persist: true, unload: true, registerAt: undefined };
  return unload ? { persist: false, unload: false, registerAt: t.touchedClock + fireEvery } : KEEP;
}
