import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Owner, PartitionRef } from '../../activities/types';
import { type PartitionWorkflowInput, partitionWorkflowId, type RestoringSignal, type RevokeSignal } from '../../workflows/partition-workflow';
import type { PartitionSignals } from './partition-signals';

/**
 * A graceful stop signals `revoked` (reason `shutdown`) to each partition workflow the process
 * owned, and then stops its Temporal workers. Were the workflow worker to stop before those
 * workflows had taken the signal in, nothing might poll their task queue any more (the last
 * worker): they would never reach `idle`, and an activity they scheduled on this process before
 * seeing the revoke would time out. So the stop waits, bounded, until every workflow it signalled
 * has no workflow task left to run.
 */

/** The runtime's signals, recording which partition workflows were told of this process's shutdown. */
export class ShutdownRevokeSignals implements PartitionSignals {
  private readonly signalled = new Set<string>();

  constructor(private readonly inner: PartitionSignals) {}

  assigned(input: PartitionWorkflowInput, owner: Owner): Promise<void> {
    return this.inner.assigned(input, owner);
  }

  async revoked(ref: PartitionRef, signal: RevokeSignal): Promise<void> {
    await this.inner.revoked(ref, signal);
    if (signal.reason === 'shutdown') this.signalled.add(partitionWorkflowId(ref));
  }

  async restoring(ref: PartitionRef, signal: RestoringSignal): Promise<void> {
    await this.inner.restoring?.(ref, signal);
  }

  /** Workflow ids that accepted a `shutdown` revoke from this process. */
  workflows(): string[] {
    return [...this.signalled];
  }
}

/** Whether a workflow still has a workflow task to run (scheduled or started); false once it is closed or gone. */
export type WorkflowTaskProbe = (workflowId: string) => Promise<boolean>;

/**
 * A signal accepted by the server is in the workflow's history with a workflow task scheduled for
 * it (or, while one runs, buffered and given a new task the moment it completes), so "no pending
 * workflow task" after the signal means the workflow has handled it.
 */
export function temporalWorkflowTaskProbe(client: Client): WorkflowTaskProbe {
  return async (workflowId) => {
    try {
      const d = await client.workflow.getHandle(workflowId).describe();
      return d.status.name === 'RUNNING' && Boolean(d.raw.pendingWorkflowTask);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  };
}

/**
 * Polls `probe` for each workflow until none has a workflow task pending, or `timeoutMs` passed.
 * Returns the workflows still pending (or whose state could not be read) when it gave up.
 */
export async function untilWorkflowTasksDone(workflowIds: string[], probe: WorkflowTaskProbe, timeoutMs: number, pollMs = 100): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let pending = [...workflowIds];
  while (pending.length > 0) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    let timer: NodeJS.Timeout | undefined;
    const answers = await Promise.race([
      Promise.all(pending.map((id) => probe(id).catch(() => true))),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), left);
      }),
    ]);
    clearTimeout(timer);
    if (answers === undefined) break; // the server did not answer in time
    pending = pending.filter((_, i) => answers[i]);
    if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(0, deadline - Date.now()))));
  }
  return pending;
}
