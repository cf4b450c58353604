import { condition } from '@temporalio/workflow';
import type { Owner } from '../../activities/types';
import type { PartitionState } from './state';

/** Owner history kept in the status (the most recent owners). */
const OWNER_HISTORY = 20;

/** The owner the partition is recovered on next. */
export interface NextOwner {
  readonly owner: Owner;
  /** The owner before it (the same one when resuming). */
  readonly previous: Owner | undefined;
  /** The same owner again — a run continued as new, or retrying there: no new owner-history entry. */
  readonly resuming: boolean;
}

/**
 * Waits for the owner to recover the partition on, and takes it up: the next assignment, or the
 * same owner again once its owner-lost retry or self-healing backoff is over with no newer one;
 * a run continued as new while `running` resumes on its owner at once. Undefined when the
 * assignment taken up was revoked before (runs before ASSIGNMENTS_IN_ORDER_PATCH; in order, it is
 * announced and its recovery superseded at once: the same commands as when the revoke comes in a
 * later activation).
 */
export async function awaitOwner(state: PartitionState): Promise<NextOwner | undefined> {
  const { inOrder, retryPerOwner } = state.patches;
  const sameOwnerAgain = await untilOwnerDue(state);
  if (state.retired) return undefined;
  const previous = state.owner;
  const resuming = (state.phase === 'running' || sameOwnerAgain) && previous !== undefined && !state.newerAssignment();
  const owner = !inOrder ? state.latest! : resuming ? previous! : state.pending.shift()!;
  state.owner = owner;
  if (!resuming) {
    state.ownerHistory.push({ ...owner, at: Date.now() });
    if (state.ownerHistory.length > OWNER_HISTORY) state.ownerHistory.shift();
    if (retryPerOwner) state.retry = undefined; // a new owner: its backoff starts from the beginning
    if (state.patches.console) state.ownerTakenUp(); // a live member has just been assigned it
  }
  if (!inOrder && state.revokedGeneration === owner.generation) {
    // Revoked (or left) before this workflow took the assignment up: nothing to recover there.
    state.setPhase(state.revokedPhase());
    return undefined;
  }
  return { owner, previous, resuming };
}

/**
 * Waits as the phase says (`unowned` as the phase it was entered from); true when the same owner
 * is due again (no newer assignment came during its wait). A retire ends every wait.
 */
async function untilOwnerDue(state: PartitionState): Promise<boolean> {
  const { owner, retry, limits } = state;
  const phase = state.waitingAs();
  // In order: the waits are entered even when what they wait for is already there (their timer
  // started and cancelled within the task), so timer ids do not depend on the batching either.
  if (phase === 'running' || (!state.patches.inOrder && state.newerAssignment())) return false;
  const newer = () => state.newerAssignment() || state.retired;
  if (phase === 'owner-lost' && owner) {
    // The owner may be alive and only unreachable for a while — or Temporal itself was down
    // and its timeouts fired on restart. Try it again, unless a newer owner comes first.
    const due = !(await condition(newer, limits.ownerRetryMs));
    if (due && state.phase === 'owner-lost' && state.unownedDue()) state.becomeUnowned('owner-lost');
    return due;
  }
  if (phase === 'retrying' && owner && retry) {
    // Self-healing: the partition stopped on a live owner. Recover it there again from the
    // persisted state after the backoff, unless a newer owner comes first.
    return !(await condition(newer, Math.max(0, retry.nextAt - Date.now())));
  }
  if (state.patches.console && state.phase !== 'unowned' && state.ownerGoneAt !== undefined) {
    // Nobody owns it (idle, revoked, fenced): past the session timeout with no new assignment,
    // no live member will take it (Kafka would have given it to one): `unowned`.
    const wait = Math.max(1, state.ownerGoneAt + limits.unownedAfterMs - Date.now());
    if (!(await condition(newer, wait))) state.becomeUnowned(phase);
  }
  await condition(newer);
  return false;
}
