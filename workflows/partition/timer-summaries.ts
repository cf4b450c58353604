/**
 * The summaries of the partition workflow's carry-over timers, shown with the timer in the Temporal
 * UI and read by a stopping worker (workers/runtime/shutdown-revokes.ts) in the history.
 */

/** After a graceful stop's revoke: the stopped owner's activities land before the run carries over. */
export const SETTLING_BEFORE_CARRY_OVER = 'kafka-flow: settling before carrying over';

/** After a rebalance's revoke or a fence: the next assignment, taken up in this run if it comes. */
export const AWAITING_NEXT_OWNER = 'kafka-flow: awaiting the next owner';
