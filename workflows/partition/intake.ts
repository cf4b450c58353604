import { setHandler } from '@temporalio/workflow';
import type { Owner } from '../../activities/types';
import { assignedSignal, type RestoringSignal, type RevokeSignal, restoringSignal, retireSignal, revokedSignal, statusQuery } from './contract';
import type { PartitionState } from './state';

/**
 * Registers the signal handlers and the `status` query. The handlers only note what came in; the
 * main loop acts on it. Registered before the first await, so the signals that started the
 * workflow are seen by its first step.
 */
export function handleSignals(state: PartitionState): void {
  setHandler(assignedSignal, (owner) => onAssigned(state, owner));
  setHandler(revokedSignal, (revoke) => onRevoked(state, revoke));
  setHandler(restoringSignal, (progress) => onRestoring(state, progress));
  setHandler(statusQuery, () => state.status());
  setHandler(retireSignal, () => {
    state.retired = true;
  });
}

/** Assignment intake: queued in order (`inOrder`), or kept as the newest; older or repeated ones are dropped. */
function onAssigned(state: PartitionState, o: Owner): void {
  if (state.patches.inOrder) {
    const newest = state.pending.at(-1) ?? state.owner;
    if (newest && o.generation <= newest.generation) return; // an older or repeated assignment
    state.pending.push(o);
    return;
  }
  if (state.latest && o.generation <= state.latest.generation) return; // an older or repeated assignment
  state.latest = o;
}

/** Revoke intake: noted for the owner's assignment or one not taken up yet, with the flush's persist. */
function onRevoked(state: PartitionState, r: RevokeSignal): void {
  // The owner, or the newest assignment not taken up yet (the owner may have left before the
  // workflow recovered the partition on it): either way nobody should recover it there now.
  const matches = (o: Owner | undefined) => o !== undefined && r.generation === o.generation && r.memberId === o.memberId;
  if (state.patches.inOrder) {
    if (!matches(state.owner) && !state.pending.some(matches)) return;
    state.revokes.set(r.generation, r.reason);
  } else {
    if (!matches(state.owner) && !matches(state.latest)) return;
    state.revokedGeneration = r.generation;
    state.revokedReason = r.reason;
  }
  if (r.flushed) state.recordPersist(r.flushed);
  else state.showDetails();
}

/** A recovery's progress: shown while the owner it names is recovering the partition (status only, no command). */
function onRestoring(state: PartitionState, p: RestoringSignal): void {
  const o = state.owner;
  if (state.phase !== 'recovering' || !o || o.generation !== p.generation || o.memberId !== p.memberId) return;
  state.restoring = p;
  state.showDetails();
}
