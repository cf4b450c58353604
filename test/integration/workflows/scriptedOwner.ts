import { Context } from '@temporalio/activity';
import type { ApplicationFailure } from '@temporalio/common';
import type { FlowActivities, OwnerRequest, PersistRequest, RecoverRequest } from '../../../activities/types';

// Scripted activities standing in for the owning processes of a partition workflow: what is under
// test is the workflow's lifecycle logic (generations, supersession, revoke, fences, dead owners,
// continueAsNew). The real activities run in the worker end-to-end tests.

export interface Calls {
  recover: RecoverRequest[];
  foldLoopStarted: OwnerRequest[];
  foldLoopCancelled: OwnerRequest[];
  persist: PersistRequest[];
}

export interface OwnerScript {
  persistFails?: () => ApplicationFailure | undefined;
  recoverFails?: () => ApplicationFailure | undefined;
}

export function scriptedOwner(calls: Calls, script: OwnerScript = {}): FlowActivities {
  return {
    async recover(r) {
      calls.recover.push(r);
      const failure = script.recoverFails?.();
      if (failure) throw failure;
      return { fromMemory: r.keepFromGeneration !== undefined, keys: 3, snapshotsRead: 3, ms: 1, committedOffset: '10' };
    },
    async foldLoop(r) {
      calls.foldLoopStarted.push(r);
      const ctx = Context.current();
      try {
        for (;;) {
          ctx.heartbeat();
          await ctx.sleep(200);
        }
      } catch (err) {
        calls.foldLoopCancelled.push(r);
        throw err;
      }
    },
    async persist(r) {
      calls.persist.push(r);
      await Context.current().sleep(r.delayMs);
      const failure = script.persistFails?.();
      if (failure) throw failure;
      return { persistedKeys: 1, deletedKeys: 0, committedOffset: String(10 + calls.persist.length), liveKeys: 3, ms: 1, at: Date.now() };
    },
  };
}

export const newCalls = (): Calls => ({ recover: [], foldLoopStarted: [], foldLoopCancelled: [], persist: [] });
