import { CancellationScope, condition, isCancellation, proxyActivities } from '@temporalio/workflow';
import type { FlowActivities, Owner, PartitionRef } from '../../activities/types';
import { FailureTypes } from '../../activities/types';
import type { Limits } from './limits';

/** The activities as the workflow schedules them on one owner's task queue. */
export type OwnerActivities = ReturnType<typeof activitiesOn>;

export function activitiesOn(owner: Owner, limits: Limits) {
  // Timeouts make a dead owner visible instead of waiting forever on its task queue: an activity
  // not picked up, or one that stops heartbeating, ends as a TimeoutFailure: owner lost.
  return proxyActivities<FlowActivities>({
    taskQueue: owner.taskQueue,
    scheduleToStartTimeout: limits.scheduleToStartMs,
    startToCloseTimeout: '1 day',
    heartbeatTimeout: limits.heartbeatMs,
    retry: {
      maximumAttempts: 3,
      initialInterval: '1 second',
      nonRetryableErrorTypes: [FailureTypes.fenced, FailureTypes.staleGeneration, FailureTypes.persistFailed],
    },
  });
}

export const ref = (p: PartitionRef): PartitionRef => ({ flow: p.flow, topic: p.topic, partition: p.partition });

export type Raced<T> = { kind: 'done'; value: T } | { kind: 'superseded' } | { kind: 'failed'; error: unknown };

/** Runs an activity, cancelling it when `stopWhen` becomes true (e.g. a newer generation arrived). */
export async function raceStop<T>(stopWhen: () => boolean, fn: () => Promise<T>): Promise<Raced<T>> {
  const scope = new CancellationScope();
  let outcome: Raced<T> | undefined;
  const run = scope.run(fn).then(
    (value) => {
      outcome = { kind: 'done', value };
    },
    (error) => {
      outcome = isCancellation(error) ? { kind: 'superseded' } : { kind: 'failed', error };
    },
  );
  await condition(() => outcome !== undefined || stopWhen());
  if (outcome === undefined) {
    scope.cancel();
    await run;
    if (outcome === undefined || (outcome as Raced<T>).kind !== 'done') return { kind: 'superseded' };
  }
  return outcome;
}

/** A fold loop that returned instead of failing or being cancelled. */
export const LOOP_ENDED = 'fold-loop-ended';

/** A fold loop activity the workflow scheduled: `ended` is LOOP_ENDED or its failure once it is over. */
export interface FoldLoop {
  readonly scope: CancellationScope;
  done: Promise<void>;
  ended: unknown;
  readonly recovery?: string;
}

/** Schedules the fold loop on `owner` (after the recovery named `recovery`, when given) in its own cancellation scope. */
export function startFoldLoop(acts: OwnerActivities, partition: PartitionRef, owner: Owner, recovery?: string): FoldLoop {
  const scope = new CancellationScope();
  const loop: FoldLoop = { scope, done: Promise.resolve(), ended: null, recovery };
  loop.done = scope
    .run(() => acts.foldLoop({ ...ref(partition), owner, ...(recovery !== undefined ? { afterRecovery: recovery } : {}) }))
    .then(
      () => {
        loop.ended = LOOP_ENDED;
      },
      (err) => {
        loop.ended = err;
      },
    );
  return loop;
}

/** Cancels the fold loop and waits until it is over. */
export async function stopFoldLoop(loop: FoldLoop): Promise<void> {
  loop.scope.cancel();
  await loop.done;
}
