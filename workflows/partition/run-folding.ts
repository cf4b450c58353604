import type { Owner } from '../../activities/types';
import { type OwnerActivities, raceStop, ref, startFoldLoop, stopFoldLoop } from './activities';
import { handleFailure } from './failure';
import type { Recovered } from './recover';
import type { PartitionState } from './state';

/**
 * Runs the recovered partition: its fold loop, and the owner's persist reports, until the owner is
 * superseded by a newer assignment, revoked, lost or failed (the phase says which), or the history
 * is full while it still runs: `history-full`, and the fold loop keeps going in the owning process
 * for the next run to re-attach to without recovery.
 */
export async function runFolding(state: PartitionState, { owner, acts, foldLoop: early }: Recovered): Promise<'history-full' | undefined> {
  const foldLoop = early ?? startFoldLoop(acts, state.input, owner);
  const stop = () => state.newerAssignment() || state.isRevoked(owner.generation) || foldLoop.ended !== null || state.retired;
  await reportPersists(state, acts, owner, stop);
  const running = state.phase === 'running'; // else a failure already decided the phase
  const historyFull = running && !stop(); // nothing to stop for: the reports ended on a full history
  await stopFoldLoop(foldLoop);
  if (!running || state.retired) return undefined;
  if (historyFull) return 'history-full';
  if (state.isRevoked(owner.generation) && (state.patches.sameCommands || !state.newerAssignment())) {
    state.setPhase(state.revokedPhase(owner.generation));
    return undefined;
  }
  if (state.newerAssignment()) return undefined;
  handleFailure(state, foldLoop.ended);
  return undefined;
}

/**
 * The persist reports: one activity at a time that waits for the owner's periodic persist (at
 * least persistEvery, and at least reportEveryMinMs) and reports what it landed — until `stop`,
 * a failed persist (handleFailure decides the phase), or a full history.
 */
async function reportPersists(state: PartitionState, acts: OwnerActivities, owner: Owner, stop: () => boolean): Promise<void> {
  const { input, limits } = state;
  // In order: the next persist is always scheduled, and cancelled at once when the loop should
  // stop (nothing reaches the history): whether a signal is seen in the same activation as the
  // last persist's result or in the next one, the activity ids that follow are the same.
  while (state.patches.inOrder || !stop()) {
    if (state.historyFull()) return;
    const persisted = await raceStop(stop, () =>
      acts.persist({ ...ref(input), owner, delayMs: Math.max(input.persistEveryMs, limits.reportEveryMinMs), reason: 'timer' }),
    );
    if (persisted.kind === 'superseded') return;
    if (persisted.kind === 'failed') {
      handleFailure(state, persisted.error);
      return;
    }
    if (persisted.value.skipped) continue; // the owner let go (its revoke signal is on its way)
    state.recordPersist(persisted.value);
    state.showLoad(persisted.value.liveKeys, persisted.value.lag);
    if (state.retry) {
      // Healthy again: the next failure starts the backoff from the beginning.
      state.retry = undefined;
      state.lastError = undefined;
      state.showDetails();
    }
  }
}
