import { condition, continueAsNew, patched } from '@temporalio/workflow';
import { awaitOwner } from './partition/await-owner';
import type { PartitionWorkflowInput } from './partition/contract';
import { handleSignals } from './partition/intake';
import { recoverOn } from './partition/recover';
import { runFolding } from './partition/run-folding';
import { AWAITING_NEXT_OWNER, SETTLING_BEFORE_CARRY_OVER } from './partition/timer-summaries';
import { type Patches, PartitionState } from './partition/state';

export {
  assignedSignal,
  type OwnerRecord,
  type PartitionStatus,
  type PartitionWorkflowInput,
  type Phase,
  partitionWorkflowId,
  type RestoringSignal,
  type RetryStatus,
  type RevokeSignal,
  restoringSignal,
  retireSignal,
  revokedSignal,
  statusQuery,
} from './partition/contract';
export { DEFAULT_LIMITS, type Limits, retryDelay } from './partition/limits';

/**
 * One workflow per (flow, topic, partition), id `kafka-flow/<flow>/<topic>/<partition>`. It owns
 * the partition's lifecycle — assignment, recovery, the persist cadence, revocation — while the
 * activities do the work on the owning process's own task queue. Deterministic: no I/O, no clock
 * but the workflow's. Its steps are in partition/: the state it carries (state.ts), the signal
 * intake (intake.ts), waiting for the next owner (await-owner.ts), recovering (recover.ts),
 * running (run-folding.ts), failures (failure.ts).
 */
export async function partitionWorkflow(input: PartitionWorkflowInput): Promise<void> {
  const state = new PartitionState(input, askPatches());
  handleSignals(state);
  for (;;) {
    if (state.retired) {
      state.setPhase('retired');
      return;
    }
    if (state.historyFull() || (await carryOverBetweenOwners(state))) await carryOver(state);
    const next = await awaitOwner(state);
    if (next === undefined) continue;
    const recovered = await recoverOn(state, next);
    if (recovered === undefined) continue;
    if ((await runFolding(state, recovered)) === 'history-full') await carryOver(state);
  }
}

/**
 * Between owners past carryOverOwnerlessEvents: whether to continue as new now. A continue-as-new
 * sent while events come in is refused (UnhandledCommand): the task fails, the run is evicted and
 * replayed, and the partition waits for it — and on a busy worker the retried task was seen lost for
 * the 10 s task timeout. So (CARRY_OVER_AFTER_REBALANCE_PATCH):
 * - after a rebalance's revoke (or a fence) the next assignment usually follows within a second, and
 *   the worker that has the run cached handles it whoever the new owner is: the run waits for it (up
 *   to unownedAfterMs, the session timeout, after which none will come) and takes it up here;
 * - after a graceful stop (`idle`) the stopped owner's fold loop and persist report still complete
 *   (they end on their own once it has signalled the revoke): the run lets them land first
 *   (idleSettleMs), then carries over — unless the next assignment came meanwhile. The stopping
 *   worker waits for this carry-over (its timer's summary marks it: workers/runtime/shutdown-revokes.ts),
 *   so that a worker started later replays a short run;
 * - `unowned`: at once.
 */
async function carryOverBetweenOwners(state: PartitionState): Promise<boolean> {
  if (!state.carryOverDue()) return false;
  if (!state.patches.nextOwnerFirst || state.phase === 'unowned') return true;
  const newer = () => state.newerAssignment() || state.retired;
  if (state.phase === 'idle') return !(await condition(newer, state.limits.idleSettleMs, { summary: SETTLING_BEFORE_CARRY_OVER }));
  return !(await condition(newer, state.limits.unownedAfterMs, { summary: AWAITING_NEXT_OWNER }));
}

/** Continues as new with what the state carries (the history stays bounded). Never returns. */
function carryOver(state: PartitionState): Promise<never> {
  return continueAsNew<typeof partitionWorkflow>({ ...state.input, carried: state.carried() });
}

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

/**
 * What the operator sees in the Temporal UI's list (issue 32): the search attributes are upserted
 * only when a value changed (a continue-as-new re-attach, a repeated phase: no event), the owner's
 * reports also show the partition's lag and key count (coarse: workflows/partition/console.ts, at
 * most one upsert per report), and a partition with no live owner for unownedAfterMs (the flow's
 * consumer session timeout) shows `unowned` — a timer, and a lost owner's retries no longer show
 * `recovering` and `owner-lost` each time. Runs recorded before this patch replay the old way.
 */
const OPERATOR_CONSOLE_PATCH = 'operator-console';

/**
 * Between owners (idle after a shutdown, revoked, fenced) a run with more than
 * carryOverOwnerlessEvents history events continues as new: the next owner's worker, which does not
 * have the run cached (a restarted process, another member), replays the new run's few events
 * instead of up to maxHistoryEvents before its first workflow task — ≈ 1 ms per event, for every
 * partition it takes. Runs recorded before this patch replay the old way.
 */
const CARRY_OVER_OWNERLESS_PATCH = 'carry-over-between-owners';

/**
 * Between owners after a rebalance's revoke (or a fence), a long run waits for the next assignment
 * before it would carry over, and takes it up in this run; after a graceful stop's, it lets the
 * stopped owner's last activity completions land first (carryOverBetweenOwners). Continuing as new
 * at the revoke raced what follows it within ~0.1 s: Temporal refused the continue-as-new with
 * UnhandledCommand (the assignment, the cancelled fold loop's completion), each time evicting and
 * replaying the run — ≈ 0.7 s before a partition kept by its owner through an eager rebalance was
 * running again (bench:failover), and at graceful stops retried tasks lost for 10 s
 * (bench:rebalance). Runs recorded before this patch replay the old way.
 */
const CARRY_OVER_AFTER_REBALANCE_PATCH = 'carry-over-after-rebalance';

/**
 * Every patch is asked first thing, in this order, so that its marker is at the same place in every
 * run (a patch asked for only on some paths would itself be a command that differs between them).
 * MONOTONIC_COMMITTED_PATCH is the exception: see there.
 */
function askPatches(): Patches {
  return {
    sameCommands: patched(SAME_COMMANDS_PATCH),
    retryPerOwner: patched(RETRY_PER_OWNER_PATCH),
    inOrder: patched(ASSIGNMENTS_IN_ORDER_PATCH),
    foldWithRecovery: patched(FOLD_WITH_RECOVERY_PATCH),
    console: patched(OPERATOR_CONSOLE_PATCH),
    carryOverOwnerless: patched(CARRY_OVER_OWNERLESS_PATCH),
    nextOwnerFirst: patched(CARRY_OVER_AFTER_REBALANCE_PATCH),
    keepCommitted: () => patched(MONOTONIC_COMMITTED_PATCH),
  };
}
