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

/** A moment as a key's timers see it: the wall clock and the partition's offset then. */
export interface Timestamp {
  readonly clock: number;
  readonly offset: number;
}

/** What a key remembers for its timers (kafka-flow's Timestamps). */
export interface KeyTimestamps {
  /** When the key was created or recovered: kafka-flow's `committedAt`. */
  readonly createdAt: Timestamp;
  persistedAt: Timestamp | undefined;
  processedAt: Timestamp | undefined;
}

export interface TimerDecision {
  /** Persist the key at the next persist. */
  readonly persist: boolean;
  /** Unload the key from memory once persisted. */
  readonly unload: boolean;
  /** When to fire next; undefined when the key is being unloaded (unloadOrphaned alone). */
  readonly registerAt: number | undefined;
}

/** When a new or recovered key's timer first fires. */
export function firstTimerAt(policy: TimerPolicy, createdAt: Timestamp): number | undefined {
  return Number.isFinite(policy.fireEvery) ? createdAt.clock + policy.fireEvery : undefined;
}

/** kafka-flow's onTimer of the three timer flows, as a decision the partition carries out. */
export function onTimer(policy: TimerPolicy, t: KeyTimestamps, current: Timestamp): TimerDecision {
  const { persistEvery, unload, fireEvery } = policy;
  const touchedAt = t.processedAt ?? t.createdAt;
  const canUnload =
    unload !== undefined &&
    (current.clock > touchedAt.clock + unload.maxIdle || current.offset - touchedAt.offset > unload.maxOffsetDifference);
  const flushedAt = t.persistedAt ?? t.createdAt;
  const canPersist = persistEvery !== undefined && current.clock >= flushedAt.clock + persistEvery;
  if (persistEvery !== undefined) {
    return { persist: canPersist || canUnload, unload: canUnload, registerAt: current.clock + fireEvery };
  }
  if (canUnload) return { persist: true, unload: true, registerAt: undefined };
  return { persist: false, unload: false, registerAt: unload ? touchedAt.clock + fireEvery : undefined };
}
