export interface Limits {
  /** Continue as new past this many history events (well before Temporal's warning at 10,240). */
  maxHistoryEvents: number;
  /**
   * With nobody running the partition (idle after a shutdown, revoked, fenced), continue as new
   * past this many history events, so that the next owner's worker replays a short history before
   * its first workflow task instead of up to maxHistoryEvents (runs with CARRY_OVER_OWNERLESS_PATCH).
   */
  carryOverOwnerlessEvents: number;
  /**
   * After a graceful stop's revoke, how long a run past carryOverOwnerlessEvents lets the stopped
   * owner's last activity completions land before it carries over (CARRY_OVER_AFTER_REBALANCE_PATCH).
   */
  idleSettleMs: number;
  /** An activity not picked up by its owner within this long means the owner is gone. */
  scheduleToStartMs: number;
  /** A fold loop or persist that stops heartbeating for this long means the owner is gone. */
  heartbeatMs: number;
  /** After losing its owner, try the same owner again after this long (unless a newer one came). */
  ownerRetryMs: number;
  /** After a failure on the owner, recover again after this long, doubling per attempt… */
  retryInitialMs: number;
  /** …up to this long. */
  retryMaxMs: number;
  /**
   * The running loop's persist report (an activity) waits at least this long, and at least
   * persistEvery: the owning process persists on its own cadence whatever this is, so raising it
   * only makes the workflow hear of the persists less often (KFT_WORKFLOW_REPORT_EVERY_MS).
   */
  reportEveryMinMs: number;
  /**
   * A partition with no live owner for this long shows `unowned` (runs with
   * OPERATOR_CONSOLE_PATCH): the flow's consumer session timeout, after which Kafka has given a
   * dead member's partitions to the members left — none came.
   */
  unownedAfterMs: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxHistoryEvents: 2_000,
  carryOverOwnerlessEvents: 50,
  idleSettleMs: 1_000,
  scheduleToStartMs: 30_000,
  heartbeatMs: 10_000,
  ownerRetryMs: 10_000,
  retryInitialMs: 1_000,
  retryMaxMs: 5_000,
  reportEveryMinMs: 0,
  unownedAfterMs: 30_000,
};

/** The backoff cap of runs recorded before RETRY_PER_OWNER_PATCH (they replay with it). */
const LEGACY_RETRY_MAX_MS = 60_000;

/** A run's limits: the defaults (with the legacy backoff cap for runs before RETRY_PER_OWNER_PATCH), then the input's overrides. */
export function limitsOf(overrides: Partial<Limits> | undefined, retryPerOwner: boolean): Limits {
  return { ...DEFAULT_LIMITS, ...(retryPerOwner ? {} : { retryMaxMs: LEGACY_RETRY_MAX_MS }), ...overrides };
}

/** The wait before retry `attempt` (1, 2, …): retryInitialMs doubling, capped at retryMaxMs. */
export function retryDelay(limits: Pick<Limits, 'retryInitialMs' | 'retryMaxMs'>, attempt: number): number {
  return Math.min(limits.retryMaxMs, limits.retryInitialMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
}
