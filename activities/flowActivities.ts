import { ApplicationFailure, Context } from '@temporalio/activity';
import type { FlowActivities, OwnerRequest, PersistRequest, PersistResult, RecoverRequest, RecoverResult } from './types';
import { FailureTypes } from './types';
import { KafkaFlowError } from '../config/errors';
import { SnapshotWriteFenced } from '../persistence/errors';
import { type FlowRuntime, StaleGenerationError } from '../workers/flowRuntime';

/**
 * The activities of one worker process: thin adapters from a partition workflow's requests to the
 * flow runtimes of this process. Fences and stale generations come back as typed, non-retryable
 * failures the workflow records, never as crashes.
 */
export function createFlowActivities(runtimes: ReadonlyMap<string, FlowRuntime>): FlowActivities {
  const runtimeOf = (flow: string): FlowRuntime => {
    const rt = runtimes.get(flow);
    if (!rt) throw ApplicationFailure.nonRetryable(`flow "${flow}" does not run in this process`, FailureTypes.staleGeneration);
    return rt;
  };

  return {
    async recover(request: RecoverRequest): Promise<RecoverResult> {
      const rt = runtimeOf(request.flow);
      const beat = setInterval(() => Context.current().heartbeat({ phase: 'recovering' }), 2000);
      try {
        return await rt.recover(request);
      } catch (err) {
        throw typed(err);
      } finally {
        clearInterval(beat);
      }
    },

    async foldLoop(request: OwnerRequest): Promise<void> {
      const rt = runtimeOf(request.flow);
      const ctx = Context.current();
      let folding: ReturnType<FlowRuntime['startFolding']>;
      try {
        folding = rt.startFolding(request);
      } catch (err) {
        throw typed(err);
      }
      try {
        for (;;) {
          const p = folding.poll();
          if (p.failure !== undefined) throw typed(p.failure);
          if (!p.running) return;
          ctx.heartbeat(p.progress);
          // Ends by cancellation (a newer owner, a revoke): the sleep rejects with CancelledFailure.
          await ctx.sleep(2000);
        }
      } finally {
        rt.stopFolding(request, folding.token);
      }
    },

    async persist(request: PersistRequest): Promise<PersistResult> {
      const rt = runtimeOf(request.flow);
      const ctx = Context.current();
      // The persist timer: wait (heartbeating, cancellable), then persist the keys that are due.
      let remaining = request.delayMs;
      while (remaining > 0) {
        ctx.heartbeat({ waitingMs: remaining });
        const step = Math.min(remaining, 2000);
        await ctx.sleep(step);
        remaining -= step;
      }
      try {
        return await rt.persist(request);
      } catch (err) {
        throw typed(err);
      }
    },
  };
}

function typed(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof SnapshotWriteFenced) return ApplicationFailure.create({ message: err.message, type: FailureTypes.fenced, nonRetryable: true, cause: err });
  if (err instanceof StaleGenerationError) return ApplicationFailure.create({ message: err.message, type: FailureTypes.staleGeneration, nonRetryable: true });
  if (err instanceof KafkaFlowError) {
    // The partition stopped for a reason of ours (a fold or decode failure, a failed persist):
    // retrying the activity would not help; the workflow records it and waits for reassignment.
    return ApplicationFailure.create({ message: `${err.name}: ${err.message}`, type: FailureTypes.persistFailed, nonRetryable: true, cause: err });
  }
  return err;
}
