import { ApplicationFailure, Context } from '@temporalio/activity';
import { TemporalFailure } from '@temporalio/common';
import type { FlowActivities, FoldLoopRequest, PersistRequest, PersistResult, RecoverRequest, RecoverResult } from './types';
import { type PartitionHost, StaleGenerationError } from './partition-host';
import { FailureTypes } from './types';
import { KafkaFlowError } from '../config/errors';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import { causeText, withheld } from '../core/redact';

/**
 * The activities of one worker process: thin adapters from a partition workflow's requests to the
 * partition hosts (flow runtimes) of this process. Fences and stale generations come back as typed, non-retryable
 * failures the workflow records, never as crashes.
 */
export function createFlowActivities(runtimes: ReadonlyMap<string, PartitionHost>): FlowActivities {
  const runtimeOf = (flow: string): PartitionHost => {
    const rt = runtimes.get(flow);
    if (!rt) throw ApplicationFailure.nonRetryable(`flow "${flow}" does not run in this process`, FailureTypes.staleGeneration);
    return rt;
  };

  return {
    async recover(request: RecoverRequest): Promise<RecoverResult> {
      const rt = runtimeOf(request.flow);
      return rt.activity(() => heartbeating({ phase: 'recovering' }, () => rt.recover(request)));
    },

    async foldLoop(request: FoldLoopRequest): Promise<void> {
      const rt = runtimeOf(request.flow);
      const ctx = Context.current();
      await rt.activity(async () => {
        if (request.afterRecovery !== undefined && rt.recoveryDone) {
          // Scheduled with the recovery (the workflow's round trip between the two is saved): wait
          // for it here. A failed or superseded recovery ends this wait by cancellation.
          for (;;) {
            let recovery: ReturnType<NonNullable<PartitionHost['recoveryDone']>>;
            try {
              recovery = rt.recoveryDone(request);
            } catch (err) {
              throw typed(err);
            }
            if (recovery === 'done') break;
            if (recovery === 'ended') return;
            ctx.heartbeat({ phase: 'awaiting recovery' });
            await ctx.sleep(RECOVERY_POLL_MS);
          }
        }
        let folding: ReturnType<PartitionHost['startFolding']>;
        try {
          folding = rt.startFolding(request);
        } catch (err) {
          throw typed(err);
        }
        try {
          // The consumer hands this loop the partition's batches and waits while it folds each.
          let beatAt = 0;
          for (;;) {
            const p = folding.poll();
            if (p.failure !== undefined) throw typed(p.failure);
            // Revoked, stopping, or another fold loop took over — but a revoke ends the loop only
            // once the workflow has been told (else it would take the ended loop for a lost owner).
            if (!p.running && !p.settling) return;
            // Heartbeats are throttled by the SDK; beating often lets a revoke end the loop at once.
            if (Date.now() - beatAt >= POLL_MS) {
              ctx.heartbeat(p.progress);
              beatAt = Date.now();
            }
            await folding.foldNext(POLL_MS, ctx.cancellationSignal);
            // Ends by cancellation (a newer owner, a revoke): rejects with the CancelledFailure.
            if (ctx.cancellationSignal.aborted) await ctx.cancelled;
          }
        } finally {
          rt.stopFolding(request, folding.token);
        }
      });
    },

    async persist(request: PersistRequest): Promise<PersistResult> {
      const rt = runtimeOf(request.flow);
      const ctx = Context.current();
      return rt.activity(async () => {
        // Wait (heartbeating, cancellable) until persistEvery after the last periodic persist started
        // here (or after this activity started), then report: the owner's persist cadence alone
        // decides when it persists (workers/runtime/persist-cadence.ts). A partition revoked here
        // meanwhile ends the wait: its revoke signal carries the flush.
        const since = rt.lastPersistAt?.(request);
        const until = (since ?? Date.now()) + request.delayMs;
        for (;;) {
          let readiness: ReturnType<PartitionHost['persistReadiness']>;
          try {
            readiness = rt.persistReadiness(request);
          } catch (err) {
            throw typed(err);
          }
          if (readiness === 'skip') return skipped();
          const remaining = until - Date.now();
          if (remaining <= 0 && readiness === 'persist') break;
          ctx.heartbeat({ waitingMs: Math.max(0, remaining) });
          await ctx.sleep(Math.max(1, Math.min(POLL_MS, remaining > 0 ? remaining : POLL_MS)));
        }
        // The write may take several transactions: keep heartbeating while it runs.
        return heartbeating({ phase: 'persisting' }, () => rt.persist(request));
      });
    },
  };
}

/** How often the long-running activities look at their partition and heartbeat (a revoke ends them within this). */
const POLL_MS = 250;

/** How often a fold loop scheduled with its recovery looks whether the recovery is done (its first batch waits for this). */
const RECOVERY_POLL_MS = 10;

function skipped(): PersistResult {
  return { persistedKeys: 0, deletedKeys: 0, liveKeys: 0, ms: 0, at: Date.now(), skipped: true };
}

/** Runs `fn` heartbeating `details` every second (the SDK throttles what it sends), typing its failure. */
async function heartbeating<T>(details: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat(details);
  const beat = setInterval(() => ctx.heartbeat(details), 1000);
  try {
    return await fn();
  } catch (err) {
    throw typed(err);
  } finally {
    clearInterval(beat);
  }
}

/**
 * The failure an activity returns to Temporal for `err`: its message becomes the workflow history's
 * and the partition's `lastError`, so it holds nothing of a record unless the flow has `logKeys`.
 * This project's errors are safe by construction (keys hashed, a user cause withheld, see
 * core/redact); any other error that is not known to be safe (a filter's or remapKey's own) goes
 * as its class name only, still retryable as the SDK would have made it.
 */
function typed(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof SnapshotWriteFencedError || err instanceof SnapshotWriteConflictError) {
    return ApplicationFailure.create({ message: err.message, type: FailureTypes.fenced, nonRetryable: true, cause: err });
  }
  if (err instanceof StaleGenerationError) return ApplicationFailure.create({ message: err.message, type: FailureTypes.staleGeneration, nonRetryable: true });
  if (err instanceof KafkaFlowError) {
    // The partition stopped for a reason of ours (a fold or decode failure, a failed persist, a
    // commit that landed late): retrying the activity would not help; the workflow records it and
    // recovers the partition again on the same owner after a backoff (self-healing, 'retrying').
    return ApplicationFailure.create({ message: `${err.name}: ${err.message}`, type: FailureTypes.persistFailed, nonRetryable: true, cause: err });
  }
  // Temporal's own (a cancellation) and aborts pass as they are: the SDK tells them apart by class.
  if (err instanceof TemporalFailure || (err instanceof Error && err.name === 'AbortError')) return err;
  const shown = withheld(err);
  if (shown === err) return err;
  return ApplicationFailure.create({ message: causeText(shown), type: err instanceof Error ? err.name : typeof err, nonRetryable: false, cause: shown as Error });
}
