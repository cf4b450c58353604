/**
 * A partition workflow whose workflow task fails on every attempt with a fatal error of the
 * Temporal SDK's own state machines ("Fatal error in workflow machines: ActivityMachine in state
 * ScheduledActivityCancelCommandCreated says the transition is invalid during event …
 * ActivityTaskTimedOut": a cancel the workflow requested raced an activity's timeout on the server)
 * never moves again: each retry replays the same history into the same error, and its partition is
 * held by a live owner but never folded. The owner's watchdog (ConsumerSide.reassertStalled) asks
 * here whether that is the case and, if so, terminates the run — the partition's state is in its
 * persistence, not in the workflow — so that the assignment it signals next starts a fresh run,
 * which recovers the partition on its owner. Anything else that fails a workflow task (a
 * nondeterminism error after a deployment, a bug in the workflow) is left to the operator.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** What the check reads of an event. */
export interface TaskEventFacts {
  readonly type: temporal.api.enums.v1.EventType | null | undefined;
  readonly failure?: string;
}

/** The SDK's own fatal error in its state machines (temporalio_sdk_core), as a failed workflow task reports it. */
const SDK_FATAL = /^Fatal error in workflow machines/;

/** How many failed attempts in a row, with no task completed since, make the failure deterministic. */
export const STUCK_AFTER_ATTEMPTS = 2;

/**
 * The SDK fatal error the newest events (newest first) end in, repeated since the last completed
 * workflow task; undefined when the run is not stuck so.
 */
export function sdkFatalStuck(newestFirst: readonly TaskEventFacts[]): string | undefined {
  let failures = 0;
  let message: string | undefined;
  for (const e of newestFirst) {
    if (e.type === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) break;
    if (e.type !== temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) continue;
    if (!e.failure || !SDK_FATAL.test(e.failure)) return undefined;
    failures++;
    message ??= e.failure;
  }
  return failures >= STUCK_AFTER_ATTEMPTS ? message : undefined;
}

/**
 * Terminates the workflow's current run if sdkFatalStuck says it is stuck; true when it did.
 * Reads the run id first, and terminates that run only (a run started since is left alone).
 */
export async function terminateIfStuck(client: Client, namespace: string, workflowId: string): Promise<{ terminated: boolean; error?: string }> {
  const handle = client.workflow.getHandle(workflowId);
  const description = await handle.describe();
  if (description.status.name !== 'RUNNING') return { terminated: false };
  const runId = description.runId;
  const r = await client.workflowService.getWorkflowExecutionHistoryReverse({ namespace, execution: { workflowId, runId }, maximumPageSize: 32 });
  const facts = (r.history?.events ?? []).map((e) => ({ type: e.eventType, failure: e.workflowTaskFailedEventAttributes?.failure?.message ?? undefined }));
  const error = sdkFatalStuck(facts);
  if (!error) return { terminated: false };
  await client.workflow
    .getHandle(workflowId, runId)
    .terminate(`kafka-flow: every workflow task of this run fails on a Temporal SDK state-machine error (${error.slice(0, 200)}); terminated so that its owner's next assignment starts a fresh run from the persisted state`);
  return { terminated: true, error };
}
