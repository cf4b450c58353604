import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  continueAsNew,
  patched,
  setHandler,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Owner } from '../activities/types';
import { FailureTypes } from '../activities/types';
import { committedAfter } from './committed-offset';
import { activitiesOn, LOOP_ENDED, raceStop, ref, startFoldLoop } from './partition/activities';
import {
  assignedSignal,
  type Counters,
  type OwnerRecord,
  type PartitionWorkflowInput,
  type Phase,
  type RetryStatus,
  type RevokeSignal,
  revokedSignal,
  statusQuery,
} from './partition/contract';
import { type Limits, limitsOf, retryDelay } from './partition/limits';
import { searchAttributes } from './search-attributes';

export {
  assignedSignal,
  type OwnerRecord,
  type PartitionStatus,
  type PartitionWorkflowInput,
  type Phase,
  partitionWorkflowId,
  type RetryStatus,
  type RevokeSignal,
  revokedSignal,
  statusQuery,
} from './partition/contract';
export { DEFAULT_LIMITS, type Limits, retryDelay } from './partition/limits';

/**
 * One workflow per (flow, topic, partition), id `kafka-flow/<flow>/<topic>/<partition>`. It owns
 * the partition's lifecycle — assignment, recovery, the persist cadence, revocation — while the
 * activities do the work on the owning process's own task queue. Deterministic: no I/O, no clock
 * but the workflow's.
 */

/** Owner history kept in the status (the most recent owners). */
const OWNER_HISTORY = 20;

/**
 * A revoke and the next assignment often arrive in one workflow task. The phase `revoked` is now
 * upserted even when the newer assignment is already known, so the commands are the same whether
 * its signal is seen in the same activation or a later one (a chaos run caught a replay that saw it
 * earlier than the original run had: a nondeterminism error that left the partition stuck). Runs
 * recorded before this patch replay the old way.
 */
const SAME_COMMANDS_PATCH = 'revoked-phase-before-newer-owner';

/**
 * The retry backoff belongs to one owner: a new owner starts from the first attempt (it used to
 * inherit the previous owner's count, so the first owner after a long outage waited up to the cap
 * before its first try), and the cap is 5 s (was 60 s, then 15 s: after an outage a partition was back
 * up to a minute after its server). The chaos suite measured both as stalls. Runs recorded before this
 * patch replay the old way.
 */
const RETRY_PER_OWNER_PATCH = 'retry-backoff-per-owner';

/**
 * Assignments are taken up one at a time in the order they came, each one announced
 * (`recovering`) before its revoke is looked at, so the commands depend only on the order of the
 * signals — not on how they are batched into activations. Likewise the next persist is always
 * scheduled (and cancelled at once if the loop should stop), and the owner-lost / retry waits are
 * always entered, so activity and timer ids do not depend on whether a signal came in the same
 * activation as an activity's result (a later chaos run caught that shape too). A chaos run caught a replay that saw
 * assigned(g2), revoked(g2), assigned(g3) in one activation where the original run had seen
 * assigned(g2) alone first (around a workflow task that timed out): the replay skipped g2, the
 * original had announced it, and the run failed on a nondeterminism error. Runs recorded before
 * this patch replay the old way (the newest assignment wins).
 */
const ASSIGNMENTS_IN_ORDER_PATCH = 'assignments-in-order';

/**
 * The fold loop is scheduled in the same workflow task as the recovery, on an owner whose fold
 * loop waits in its process for the recovery it names (Owner.foldAwaitsRecovery): the first
 * record is folded as soon as the recovery is done, without the workflow task that took its result
 * and the fold loop's dispatch in between (≈ 0.1–0.3 s per assignment, measured). A recovery that
 * fails or is superseded cancels the loop. Runs recorded before this patch, and owners without the
 * flag, recover and then fold as before.
 */
const FOLD_WITH_RECOVERY_PATCH = 'fold-loop-with-recovery';

/**
 * A persist's result that reaches the workflow after a later one (a timer persist's completion
 * behind the revoke's flush, which landed after it in the owner's serialized chain) no longer
 * moves the shown committed offset back: the status said '11' after the revoke had reported '99'.
 * Status only (no command depends on it); the marker is recorded only when a result is behind,
 * so runs recorded before it replay as they were.
 */
const MONOTONIC_COMMITTED_PATCH = 'committed-offset-never-back';
const keepCommitted = () => patched(MONOTONIC_COMMITTED_PATCH);

export async function partitionWorkflow(input: PartitionWorkflowInput): Promise<void> {
  // First, so that its marker is at the same place in every run (a patch asked for only on some
  // paths would itself be a command that differs between them).
  const sameCommands = patched(SAME_COMMANDS_PATCH);
  const retryPerOwner = patched(RETRY_PER_OWNER_PATCH);
  const inOrder = patched(ASSIGNMENTS_IN_ORDER_PATCH);
  const foldWithRecovery = patched(FOLD_WITH_RECOVERY_PATCH);
  const c = input.carried;
  /** Names this run's recoveries for the fold loops scheduled with them. */
  let recoveries = 0;
  const limits: Limits = limitsOf(input.limits, retryPerOwner);
  const historyFull = () => workflowInfo().historyLength > limits.maxHistoryEvents || workflowInfo().continueAsNewSuggested;
  let owner: Owner | undefined = c?.owner;
  let phase: Phase = c?.phase ?? 'unassigned';
  const ownerHistory: OwnerRecord[] = c?.ownerHistory ?? [];
  let committedOffset = c?.committedOffset;
  let lastPersist = c?.lastPersist;
  let lastRecovery = c?.lastRecovery;
  let retry: RetryStatus | undefined = c?.retry;
  let lastError: string | undefined = retry?.lastError;
  const counters: Counters = c?.counters ?? { persists: 0, fences: 0, recoveries: 0, ownerLosses: 0, persistFailures: 0, runs: 0 };
  counters.runs++;
  /** The newest assignment seen; `owner` catches up with it in the main loop. */
  let latest: Owner | undefined = owner;
  let revokedGeneration = -1;
  let revokedReason: RevokeSignal['reason'] = 'revoke';
  /** In order (inOrder): assignments not taken up yet, and the revokes by generation. */
  const pending: Owner[] = c?.pending ? [...c.pending] : [];
  const revokes = new Map<number, RevokeSignal['reason']>((c?.revoked ?? []).map((r) => [r.generation, r.reason]));
  const isRevoked = (generation: number) => (inOrder ? revokes.has(generation) : revokedGeneration === generation);

  setHandler(assignedSignal, (o) => {
    if (inOrder) {
      const newest = pending.at(-1) ?? owner;
      if (newest && o.generation <= newest.generation) return; // an older or repeated assignment
      pending.push(o);
      return;
    }
    if (latest && o.generation <= latest.generation) return; // an older or repeated assignment
    latest = o;
  });
  setHandler(revokedSignal, (r) => {
    // The owner, or the newest assignment not taken up yet (the owner may have left before the
    // workflow recovered the partition on it): either way nobody should recover it there now.
    const matches = (o: Owner | undefined) => o !== undefined && r.generation === o.generation && r.memberId === o.memberId;
    if (inOrder) {
      if (!matches(owner) && !pending.some(matches)) return;
      revokes.set(r.generation, r.reason);
    } else {
      if (!matches(owner) && !matches(latest)) return;
      revokedGeneration = r.generation;
      revokedReason = r.reason;
    }
    if (r.flushed) {
      lastPersist = r.flushed;
      committedOffset = committedAfter(committedOffset, r.flushed.committedOffset, keepCommitted);
      counters.persists++;
      // Counters only (no commands): runs recorded before them replay the same.
      if (r.flushed.outputs) counters.outputs = (counters.outputs ?? 0) + r.flushed.outputs;
      if (r.flushed.deadLetters) counters.deadLetters = (counters.deadLetters ?? 0) + r.flushed.deadLetters;
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
    retry,
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
  const newerAssignment = () =>
    inOrder ? pending.length > 0 : latest !== undefined && (owner === undefined || latest.generation > owner.generation);
  /** What continue-as-new carries of the signals not acted on yet. */
  const unhandled = () => (inOrder ? { pending: [...pending], revoked: [...revokes].map(([generation, reason]) => ({ generation, reason })) } : {});

  for (;;) {
    if (historyFull()) {
      await continueAsNew<typeof partitionWorkflow>({
        ...input,
        carried: { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry, ...unhandled() },
      });
    }
    let sameOwnerAgain = false;
    // In order: the waits are entered even when what they wait for is already there (their timer
    // started and cancelled within the task), so timer ids do not depend on the batching either.
    if (phase !== 'running' && (inOrder || !newerAssignment())) {
      if (phase === 'owner-lost' && owner) {
        // The owner may be alive and only unreachable for a while — or Temporal itself was down
        // and its timeouts fired on restart. Try it again, unless a newer owner comes first.
        sameOwnerAgain = !(await condition(newerAssignment, limits.ownerRetryMs));
      } else if (phase === 'retrying' && owner && retry) {
        // Self-healing: the partition stopped on a live owner. Recover it there again from the
        // persisted state after the backoff, unless a newer owner comes first.
        sameOwnerAgain = !(await condition(newerAssignment, Math.max(0, retry.nextAt - Date.now())));
      } else {
        await condition(newerAssignment);
      }
    }
    const previous = owner;
    // After continueAsNew, or retrying on the same owner: the same owner, no new history entry.
    const resuming = (phase === 'running' || sameOwnerAgain) && previous !== undefined && !newerAssignment();
    owner = !inOrder ? latest! : resuming ? previous! : pending.shift()!;
    if (!resuming) {
      ownerHistory.push({ ...owner, at: Date.now() });
      if (ownerHistory.length > OWNER_HISTORY) ownerHistory.shift();
      if (retryPerOwner) retry = undefined; // a new owner: its backoff starts from the beginning
    }
    if (!inOrder && revokedGeneration === owner.generation) {
      // Revoked (or left) before this workflow took the assignment up: nothing to recover there.
      // (In order, it is announced first and its recovery superseded at once: the same commands
      // as when the revoke comes in a later activation.)
      setPhase(revokedPhase());
      continue;
    }
    // Same process, next generation, nobody else in between: it keeps its in-memory state —
    // unless the partition failed there (`retrying` recovers from the persisted state).
    const keepFromGeneration =
      previous && previous.taskQueue === owner.taskQueue && (phase === 'running' || phase === 'revoked' || phase === 'owner-lost')
        ? previous.generation
        : undefined;
    const acts = activitiesOn(owner, limits);

    // A run continued as new re-attaches to the fold loop still running in the same process: the
    // operator sees `running` throughout (a brief `recovering` at every continue-as-new would be
    // a false alarm). Same command either way, so recorded histories still replay.
    setPhase(resuming && phase === 'running' ? 'running' : 'recovering');
    const recovering = owner;
    // The fold loop scheduled with the recovery, on an owner whose loop waits for it there.
    const early =
      foldWithRecovery && recovering.foldAwaitsRecovery === true
        ? startFoldLoop(acts, input, recovering, `${workflowInfo().runId}/${++recoveries}`)
        : undefined;
    const recovered = await raceStop(
      () => newerAssignment() || isRevoked(recovering.generation),
      () => acts.recover({ ...ref(input), owner: recovering, keepFromGeneration, ...(early ? { recovery: early.recovery } : {}) }),
    );
    if (recovered.kind !== 'done' && early) {
      early.scope.cancel();
      await early.done;
    }
    if (recovered.kind === 'superseded') {
      if ((sameCommands || !newerAssignment()) && isRevoked(recovering.generation)) setPhase(revokedPhase(recovering.generation));
      continue;
    }
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
    const foldLoop = early ?? startFoldLoop(acts, input, current);
    const loopScope = foldLoop.scope;
    const loop = foldLoop.done;
    const stop = () => newerAssignment() || isRevoked(current.generation) || foldLoop.ended !== null;

    // In order: the next persist is always scheduled, and cancelled at once when the loop should
    // stop (nothing reaches the history): whether a signal is seen in the same activation as the
    // last persist's result or in the next one, the activity ids that follow are the same.
    while (inOrder || !stop()) {
      if (historyFull()) break;
      const persisted = await raceStop(stop, () =>
        acts.persist({ ...ref(input), owner: current, delayMs: Math.max(input.persistEveryMs, limits.reportEveryMinMs), reason: 'timer' }),
      );
      if (persisted.kind === 'superseded') break;
      if (persisted.kind === 'failed') {
        handleFailure(persisted.error);
        break;
      }
      if (persisted.value.skipped) continue; // the owner let go (its revoke signal is on its way)
      lastPersist = persisted.value;
      committedOffset = committedAfter(committedOffset, persisted.value.committedOffset, keepCommitted);
      counters.persists++;
      if (persisted.value.deadLetters) counters.deadLetters = (counters.deadLetters ?? 0) + persisted.value.deadLetters;
      if (persisted.value.outputs) counters.outputs = (counters.outputs ?? 0) + persisted.value.outputs;
      if (retry) {
        // Healthy again: the next failure starts the backoff from the beginning.
        retry = undefined;
        lastError = undefined;
      }
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
        carried: { owner, phase: 'running', ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry, ...unhandled() },
      });
    }
    loopScope.cancel();
    await loop;
    if (isRevoked(current.generation) && (sameCommands || !newerAssignment())) {
      setPhase(revokedPhase(current.generation));
      continue;
    }
    if (newerAssignment()) continue;
    handleFailure(foldLoop.ended);
  }

  function revokedPhase(generation?: number): Phase {
    const reason = inOrder && generation !== undefined ? revokes.get(generation) : revokedReason;
    return reason === 'shutdown' ? 'idle' : 'revoked';
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
      // Self-healing: recover again on the same owner after a capped exponential backoff.
      counters.persistFailures++;
      counters.retries = (counters.retries ?? 0) + 1;
      const attempt = (retry?.attempt ?? 0) + 1;
      retry = { attempt, lastError: lastError ?? 'unknown', nextAt: Date.now() + retryDelay(limits, attempt) };
      setPhase('retrying');
    }
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
