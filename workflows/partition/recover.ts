import { workflowInfo } from '@temporalio/workflow';
import type { Owner } from '../../activities/types';
import { activitiesOn, type FoldLoop, type OwnerActivities, raceStop, ref, startFoldLoop, stopFoldLoop } from './activities';
import type { NextOwner } from './await-owner';
import { handleFailure } from './failure';
import type { PartitionState } from './state';

/** A partition recovered on its owner, ready to fold. */
export interface Recovered {
  readonly owner: Owner;
  readonly acts: OwnerActivities;
  /** The fold loop scheduled with the recovery (FOLD_WITH_RECOVERY_PATCH), if it was. */
  readonly foldLoop?: FoldLoop;
}

/**
 * Recovers the partition on `next.owner` (`recovering`; `running` throughout when a run continued
 * as new re-attaches to its fold loop). Undefined when the recovery was superseded by a newer
 * assignment or a revoke, or failed (then handleFailure has decided the phase).
 */
export async function recoverOn(state: PartitionState, { owner, previous, resuming }: NextOwner): Promise<Recovered | undefined> {
  const { input } = state;
  const phase = state.waitingAs();
  // Same process, next generation, nobody else in between: it keeps its in-memory state —
  // unless the partition failed there (`retrying` recovers from the persisted state).
  const keepFromGeneration =
    previous && previous.taskQueue === owner.taskQueue && (phase === 'running' || phase === 'revoked' || phase === 'owner-lost')
      ? previous.generation
      : undefined;
  const acts = activitiesOn(owner, state.limits);

  // A run continued as new re-attaches to the fold loop still running in the same process: the
  // operator sees `running` throughout (a brief `recovering` at every continue-as-new would be
  // a false alarm). Same command either way, so recorded histories still replay.
  // A lost owner tried again while `unowned` stays `unowned` until it answers.
  if (!(resuming && state.phase === 'unowned')) state.setPhase(resuming && phase === 'running' ? 'running' : 'recovering');
  // The fold loop scheduled with the recovery, on an owner whose loop waits for it there.
  const early =
    state.patches.foldWithRecovery && owner.foldAwaitsRecovery === true
      ? startFoldLoop(acts, input, owner, `${workflowInfo().runId}/${++state.recoveries}`)
      : undefined;
  const recovered = await raceStop(
    () => state.newerAssignment() || state.isRevoked(owner.generation) || state.retired,
    () => acts.recover({ ...ref(input), owner, keepFromGeneration, ...(early ? { recovery: early.recovery } : {}) }),
  );
  if (recovered.kind !== 'done' && early) await stopFoldLoop(early);
  if (recovered.kind === 'superseded') {
    if ((state.patches.sameCommands || !state.newerAssignment()) && state.isRevoked(owner.generation)) {
      state.setPhase(state.revokedPhase(owner.generation));
    }
    return undefined;
  }
  if (recovered.kind === 'failed') {
    handleFailure(state, recovered.error);
    return undefined;
  }
  state.recordRecovery(recovered.value);
  state.setPhase('running');
  state.showLoad(recovered.value.keys, undefined);
  return { owner, acts, foldLoop: early };
}
