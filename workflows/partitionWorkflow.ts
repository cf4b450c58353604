import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  isCancellation,
  proxyActivities,
  setHandler,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { FlowActivities, Owner, PartitionRef, PersistResult, RecoverResult } from '../activities/types';
import { FailureTypes } from '../activities/types';
import { searchAttributes } from './searchAttributes';

/**
 * One workflow per (flow, topic, partition), id `kafka-flow/<flow>/<topic>/<partition>`. It owns
 * the partition's lifecycle — assignment, recovery, the persist cadence, revocation — while the
 * activities do the work on the owning process's own task queue. Deterministic: no I/O, no clock
 * but the workflow's.
 */

export type Phase = 'unassigned' | 'recovering' | 'running' | 'revoked' | 'fenced' | 'owner-lost' | 'failed';

export interface PartitionWorkflowInput extends PartitionRef {
  readonly persistEveryMs: number;
  /** Overrides of the defaults below (tests use short ones). */
  readonly limits?: Partial<Limits>;
  /** Carried across continueAsNew. */
  readonly carried?: Carried;
}

export interface OwnerRecord extends Owner {
  readonly at: number;
}

interface Carried {
  readonly owner?: Owner;
  readonly phase: Phase;
  readonly ownerHistory: OwnerRecord[];
  readonly committedOffset?: string;
  readonly counters: Counters;
  readonly lastPersist?: PersistResult;
  readonly lastRecovery?: RecoverResult;
}

interface Counters {
  persists: number;
  fences: number;
  recoveries: number;
  ownerLosses: number;
  persistFailures: number;
  runs: number;
}

export interface RevokeSignal {
  readonly generation: number;
  readonly memberId: string;
  /** What the owner's flush on revoke did, when it flushed (it runs in-process; see README). */
  readonly flushed?: PersistResult;
  readonly reason: 'revoke' | 'shutdown';
}

export interface PartitionStatus extends PartitionRef {
  readonly phase: Phase;
  readonly owner?: Owner;
  readonly ownerHistory: OwnerRecord[];
  readonly committedOffset?: string;
  readonly logEndOffset?: string;
  readonly lag?: number;
  readonly liveKeys?: number;
  readonly lastPersist?: PersistResult;
  readonly lastRecovery?: RecoverResult;
  readonly lastError?: string;
  readonly counters: Counters;
  readonly persistEveryMs: number;
}

export const assignedSignal = defineSignal<[Owner]>('assigned');
export const revokedSignal = defineSignal<[RevokeSignal]>('revoked');
export const statusQuery = defineQuery<PartitionStatus>('status');

export const partitionWorkflowId = (p: PartitionRef): string => `kafka-flow/${p.flow}/${p.topic}/${p.partition}`;

/** A fold loop that returned instead of failing or being cancelled. */
const LOOP_ENDED = 'fold-loop-ended';

/** Owner history kept in the status (the most recent owners). */
const OWNER_HISTORY = 20;

export interface Limits {
  /** Continue as new past this many history events (well before Temporal's warning at 10,240). */
  maxHistoryEvents: number;
  /** An activity not picked up by its owner within this long means the owner is gone. */
  scheduleToStartMs: number;
  /** A fold loop or persist that stops heartbeating for this long means the owner is gone. */
  heartbeatMs: number;
  /** After losing its owner, try the same owner again after this long (unless a newer one came). */
  ownerRetryMs: number;
}

export const DEFAULT_LIMITS: Limits = { maxHistoryEvents: 2_000, scheduleToStartMs: 30_000, heartbeatMs: 10_000, ownerRetryMs: 10_000 };

export async function partitionWorkflow(input: PartitionWorkflowInput): Promise<void> {
  const c = input.carried;
  const limits: Limits = { ...DEFAULT_LIMITS, ...input.limits };
  const historyFull = () => workflowInfo().historyLength > limits.maxHistoryEvents || workflowInfo().continueAsNewSuggested;
  let owner: Owner | undefined = c?.owner;
  let phase: Phase = c?.phase ?? 'unassigned';
  const ownerHistory: OwnerRecord[] = c?.ownerHistory ?? [];
  let committedOffset = c?.committedOffset;
  let lastPersist = c?.lastPersist;
  let lastRecovery = c?.lastRecovery;
  let lastError: string | undefined;
  const counters: Counters = c?.counters ?? { persists: 0, fences: 0, recoveries: 0, ownerLosses: 0, persistFailures: 0, runs: 0 };
  counters.runs++;
  /** The newest assignment seen; `owner` catches up with it in the main loop. */
  let latest: Owner | undefined = owner;
  let revokedGeneration = -1;

  setHandler(assignedSignal, (o) => {
    if (latest && o.generation <= latest.generation) return; // an older or repeated assignment
    latest = o;
  });
  setHandler(revokedSignal, (r) => {
    if (!owner || r.generation !== owner.generation || r.memberId !== owner.memberId) return;
    revokedGeneration = r.generation;
    if (r.flushed) {
      lastPersist = r.flushed;
      committedOffset = r.flushed.committedOffset ?? committedOffset;
      counters.persists++;
    }
  });
  setHandler(statusQuery, () => ({
    flow: input.flow,
    topic: input.topic,
    partition: input.partition,
    phase,
    owner,
    ownerHistory,
    committedOffset,
    logEndOffset: lastPersist?.logEndOffset,
    lag: lastPersist?.lag,
    liveKeys: lastPersist?.liveKeys,
    lastPersist,
    lastRecovery,
    lastError,
    counters,
    persistEveryMs: input.persistEveryMs,
  }));

  const setPhase = (p: Phase) => {
    phase = p;
    upsertSearchAttributes([
      { key: searchAttributes.phase, value: p },
      { key: searchAttributes.generation, value: owner?.generation ?? -1 },
      { key: searchAttributes.owner, value: owner?.memberId ?? '' },
    ]);
  };
  const newerAssignment = () => latest !== undefined && (owner === undefined || latest.generation > owner.generation);

  for (;;) {
    if (historyFull()) {
      await continueAsNew<typeof partitionWorkflow>({
        ...input,
        carried: { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery },
      });
    }
    let retryingOwner = false;
    if (!newerAssignment() && phase !== 'running') {
      if (phase === 'owner-lost' && owner) {
        // The owner may be alive and only unreachable for a while — or Temporal itself was down
        // and its timeouts fired on restart. Try it again, unless a newer owner comes first.
        retryingOwner = !(await condition(newerAssignment, limits.ownerRetryMs));
      } else {
        await condition(newerAssignment);
      }
    }
    const previous = owner;
    // After continueAsNew, or retrying a lost owner: the same owner, no new history entry.
    const resuming = (phase === 'running' || retryingOwner) && previous !== undefined && !newerAssignment();
    owner = latest!;
    if (!resuming) {
      ownerHistory.push({ ...owner, at: Date.now() });
      if (ownerHistory.length > OWNER_HISTORY) ownerHistory.shift();
    }
    // Same process, next generation, nobody else in between: it keeps its in-memory state.
    const keepFromGeneration =
      previous && previous.taskQueue === owner.taskQueue && (phase === 'running' || phase === 'revoked' || phase === 'owner-lost')
        ? previous.generation
        : undefined;
    const acts = activitiesOn(owner, limits);

    setPhase('recovering');
    const recovered = await raceNewerAssignment(() =>
      acts.recover({ ...ref(input), owner: owner!, keepFromGeneration }),
    );
    if (recovered.kind === 'superseded') continue;
    if (recovered.kind === 'failed') {
      handleFailure(recovered.error);
      continue;
    }
    lastRecovery = recovered.value;
    counters.recoveries++;
    committedOffset = recovered.value.committedOffset ?? committedOffset;
    setPhase('running');

    // The fold loop runs until this owner is superseded, revoked, or lost.
    const current = owner;
    const loopScope = new CancellationScope();
    let loopEnded: unknown = null;
    const loop = loopScope.run(() => acts.foldLoop({ ...ref(input), owner: current })).then(
      () => {
        loopEnded = LOOP_ENDED;
      },
      (err) => {
        loopEnded = err;
      },
    );
    const stop = () => newerAssignment() || revokedGeneration === current.generation || loopEnded !== null;

    while (!stop()) {
      if (historyFull()) break;
      const persisted = await raceStop(stop, () =>
        acts.persist({ ...ref(input), owner: current, delayMs: input.persistEveryMs, reason: 'timer' }),
      );
      if (persisted.kind === 'superseded') break;
      if (persisted.kind === 'failed') {
        handleFailure(persisted.error);
        break;
      }
      lastPersist = persisted.value;
      committedOffset = persisted.value.committedOffset ?? committedOffset;
      counters.persists++;
    }
    if (phase !== 'running') {
      // a failure already decided the phase
      loopScope.cancel();
      await loop;
      continue;
    }
    if (!stop()) {
      // Continue as new while running: the fold loop keeps going in the process; the next run
      // re-attaches to it without recovery.
      loopScope.cancel();
      await loop;
      await continueAsNew<typeof partitionWorkflow>({
        ...input,
        carried: { owner, phase: 'running', ownerHistory, committedOffset, counters, lastPersist, lastRecovery },
      });
    }
    loopScope.cancel();
    await loop;
    if (newerAssignment()) continue;
    if (revokedGeneration === current.generation) setPhase('revoked');
    else handleFailure(loopEnded);
  }

  function handleFailure(err: unknown): void {
    if (err === LOOP_ENDED) {
      // The owner stopped folding without a failure (it is stopping, or another fold loop took
      // over): like a lost owner, try it again unless a newer one comes.
      lastError = 'the fold loop ended on the owner';
      counters.ownerLosses++;
      setPhase('owner-lost');
      return;
    }
    const type = failureType(err);
    lastError = describe(err);
    if (type === FailureTypes.fenced || type === FailureTypes.staleGeneration) {
      counters.fences++;
      setPhase('fenced');
    } else if (isOwnerLost(err)) {
      counters.ownerLosses++;
      setPhase('owner-lost');
    } else {
      counters.persistFailures++;
      setPhase('failed');
    }
  }

  type Raced<T> = { kind: 'done'; value: T } | { kind: 'superseded' } | { kind: 'failed'; error: unknown };

  async function raceNewerAssignment<T>(fn: () => Promise<T>): Promise<Raced<T>> {
    return raceStop(newerAssignment, fn);
  }

  /** Runs an activity, cancelling it when `stop` becomes true (e.g. a newer generation arrived). */
  async function raceStop<T>(stopWhen: () => boolean, fn: () => Promise<T>): Promise<Raced<T>> {
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
}

function activitiesOn(owner: Owner, limits: Limits) {
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

const ref = (p: PartitionRef): PartitionRef => ({ flow: p.flow, topic: p.topic, partition: p.partition });

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
