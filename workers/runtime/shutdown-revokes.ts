import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Owner, PartitionRef } from '../../activities/types';
import { type PartitionWorkflowInput, partitionWorkflowId, type RestoringSignal, type RevokeSignal } from '../../workflows/partition-workflow';
import type { PartitionSignals } from './partition-signals';

/**
 * A graceful stop signals `revoked` (reason `shutdown`) to each partition workflow the process
 * owned, and then stops its Temporal workers. Were the workflow worker to stop before those
 * workflows had taken the signal in, nothing might poll their task queue any more (the last
 * worker): they would never reach `idle`, and an activity they scheduled on this process before
 * seeing the revoke would time out. So the stop waits, bounded, until every workflow it signalled
 * has taken that revoke in: a workflow task completed after it in the history. Not "no workflow
 * task pending": the assignments of the partitions' next owners arrive meanwhile (a rebalance
 * started by another member does not wait for this one), and a run that carried over has its first
 * task pending — a wait for quiet ran into its 10 s bound in a rolling restart (bench:rebalance).
 */

/** The runtime's signals, recording which partition workflows were told of this process's shutdown. */
export class ShutdownRevokeSignals implements PartitionSignals {
  /** Workflow id → the revoke's generation and member id, as signalled. */
  private readonly signalled = new Map<string, { generation: number; memberId: string }>();

  constructor(private readonly inner: PartitionSignals) {}

  assigned(input: PartitionWorkflowInput, owner: Owner): Promise<void> {
    return this.inner.assigned(input, owner);
  }

  async revoked(ref: PartitionRef, signal: RevokeSignal): Promise<void> {
    await this.inner.revoked(ref, signal);
    if (signal.reason === 'shutdown') this.signalled.set(partitionWorkflowId(ref), { generation: signal.generation, memberId: signal.memberId });
  }

  async restoring(ref: PartitionRef, signal: RestoringSignal): Promise<void> {
    await this.inner.restoring?.(ref, signal);
  }

  /** Workflow ids that accepted a `shutdown` revoke from this process. */
  workflows(): string[] {
    return [...this.signalled.keys()];
  }

  /** The `shutdown` revoke this process signalled to a workflow (its last one). */
  revokeOf(workflowId: string): { generation: number; memberId: string } | undefined {
    return this.signalled.get(workflowId);
  }
}

const EventType = temporal.api.enums.v1.EventType;

/** The few facts of a history event the revoke check reads. */
export interface HistoryEventFacts {
  readonly type: temporal.api.enums.v1.EventType | null | undefined;
  /** A signal's name and its first payload's JSON (undefined if not JSON). */
  readonly signal?: { readonly name: string; readonly payload: unknown };
}

const CLOSED: ReadonlySet<number> = new Set([
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
]);

/**
 * Whether a run's history, newest event first, shows the revoke `{generation, memberId}` taken in:
 * the run is closed; or a workflow task completed after the revoke; or the run started after it (the
 * run before took it in and carried over). `pending` when the revoke is newer than every completed
 * workflow task; `unknown` when the events given reach neither.
 */
export function revokeTakenIn(newestFirst: readonly HistoryEventFacts[], revoke: { generation: number; memberId: string }, closedAtTop = true): 'taken' | 'pending' | 'unknown' {
  for (const [i, e] of newestFirst.entries()) {
    if (closedAtTop && i === 0 && e.type != null && CLOSED.has(e.type)) return 'taken';
    if (e.type === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) return 'taken';
    if (e.type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) return 'taken';
    if (e.signal?.name === 'revoked') {
      const p = e.signal.payload as { generation?: unknown; memberId?: unknown } | undefined;
      // A payload that is not JSON (a custom payload codec) counts as ours: wait for a task after it.
      if (p === undefined || (p.generation === revoke.generation && p.memberId === revoke.memberId)) return 'pending';
    }
  }
  return 'unknown';
}

function factsOf(e: temporal.api.history.v1.IHistoryEvent): HistoryEventFacts {
  const sig = e.workflowExecutionSignaledEventAttributes;
  if (!sig) return { type: e.eventType };
  let payload: unknown;
  const data = sig.input?.payloads?.[0]?.data;
  try {
    payload = data ? JSON.parse(Buffer.from(data).toString('utf8')) : undefined;
  } catch {
    payload = undefined;
  }
  return { type: e.eventType, signal: { name: sig.signalName ?? '', payload } };
}

/**
 * A probe for untilWorkflowTasksDone: true while the workflow has not taken in the `shutdown`
 * revoke this process signalled it (revokeTakenIn over its latest run's newest events, read with
 * GetWorkflowExecutionHistoryReverse: a short page per poll, whatever the history's length).
 */
export function temporalRevokeProbe(
  client: Client,
  namespace: string,
  revokeOf: (workflowId: string) => { generation: number; memberId: string } | undefined,
): WorkflowTaskProbe {
  return async (workflowId) => {
    const revoke = revokeOf(workflowId);
    if (!revoke) return false;
    let nextPageToken: Uint8Array | undefined;
    for (let page = 0; page < 4; page++) {
      let events: temporal.api.history.v1.IHistoryEvent[];
      try {
        const r = await client.workflowService.getWorkflowExecutionHistoryReverse({ namespace, execution: { workflowId }, maximumPageSize: 64, nextPageToken });
        events = r.history?.events ?? [];
        nextPageToken = r.nextPageToken && r.nextPageToken.length > 0 ? r.nextPageToken : undefined;
      } catch (err) {
        if ((err as { code?: number }).code === 5) return false; // NOT_FOUND: gone, nothing to take in
        throw err;
      }
      const taken = revokeTakenIn(events.map(factsOf), revoke, page === 0);
      if (taken !== 'unknown') return taken === 'pending';
      if (!nextPageToken) return false;
    }
    return true; // neither within the newest pages: ask again at the next poll
  };
}

/** Whether a workflow still has to take in what the stop waits for (temporalRevokeProbe); false once it has, or is gone. */
export type WorkflowTaskProbe = (workflowId: string) => Promise<boolean>;

/**
 * Polls `probe` for each workflow until none is pending any more, or `timeoutMs` passed.
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
