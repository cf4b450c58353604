import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { FailureTypes } from '../../activities/types';
import { LOOP_ENDED } from './activities';
import { retryDelay } from './limits';
import type { PartitionState } from './state';

/**
 * What stopped the partition on its owner decides the phase: a fence waits for the next
 * assignment; a lost owner (or a fold loop that ended) is tried again after ownerRetryMs; any
 * other failure is retried on the same owner after the capped exponential backoff (self-healing).
 */
export function handleFailure(state: PartitionState, err: unknown): void {
  const { counters } = state;
  if (err === LOOP_ENDED) {
    // The owner stopped folding without a failure (it is stopping, or another fold loop took
    // over): like a lost owner, try it again unless a newer one comes.
    state.lastError = 'the fold loop ended on the owner';
    counters.ownerLosses++;
    state.ownerLost();
    return;
  }
  const type = failureType(err);
  const error = describe(err);
  state.lastError = error;
  if (type === FailureTypes.fenced || type === FailureTypes.staleGeneration) {
    counters.fences++;
    state.setPhase('fenced');
  } else if (isOwnerLost(err)) {
    counters.ownerLosses++;
    state.ownerLost();
  } else {
    // Self-healing: recover again on the same owner after a capped exponential backoff.
    counters.persistFailures++;
    counters.retries = (counters.retries ?? 0) + 1;
    const attempt = (state.retry?.attempt ?? 0) + 1;
    state.retry = { attempt, lastError: error, nextAt: Date.now() + retryDelay(state.limits, attempt) };
    state.setPhase('retrying');
  }
}

function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

/** A killed worker's activity ends as a timeout (heartbeat or schedule-to-start), not a failure of ours. */
function isOwnerLost(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof TimeoutFailure;
}

function describe(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) return `${err.cause.name}: ${err.cause.message}`;
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
