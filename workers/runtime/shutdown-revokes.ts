import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Owner, PartitionRef } from '../../activities/types';
import { type PartitionWorkflowInput, partitionWorkflowId, type RestoringSignal, type RevokeSignal } from '../../workflows/partition-workflow';
import type { PartitionSignals } from './partition-signals';
import { SETTLING_BEFORE_CARRY_OVER } from '../../workflows/partition/timer-summaries';

/**
 * A graceful stop signals `revoked` (reason `shutdown`) to each partition workflow the process
 * owned, and then stops its Temporal workers. Were the workflow worker to stop before those
 * workflows had taken the signal in, nothing might poll their task queue any more (the last
 * worker): they would never reach `idle`, and an activity they scheduled on this process before
 * seeing the revoke would time out. So the stop waits, bounded, until every workflow it signalled
 * has taken that revoke in: a workflow task completed after it in the history, and the carry-over
 * that follows it done (a long run lets the activities land first, then continues as new, so that a
 * worker started later replays a short run). Not "no workflow
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

  unstick(ref: PartitionRef): Promise<boolean> {
    return this.inner.unstick?.(ref) ?? Promise.resolve(false);
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
  readonly id?: string;
  /** A signal's name and its first payload's JSON (undefined if not JSON). */
  readonly signal?: { readonly name: string; readonly payload: unknown };
  /** A timer started: its summary. A timer fired or cancelled: the id of its TIMER_STARTED event. */
  readonly timerSummary?: string;
  readonly timerStartedId?: string;
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
 * Whether a run's history, newest event first (from its newest event), shows the revoke
 * `{generation, memberId}` taken in: the run is closed; or the run started after it (the run before
 * took it in and carried over); or a workflow task completed after the revoke and no carry-over
 * timer started after it is still running (the run settles before it carries over). `pending`
 * otherwise; `unknown` when the events given reach neither the revoke nor the run's start.
 */
export function revokeTakenIn(newestFirst: readonly HistoryEventFacts[], revoke: { generation: number; memberId: string }): 'taken' | 'pending' | 'unknown' {
  let completed = false;
  let settling = false;
  const timersDone = new Set<string>();
  for (const [i, e] of newestFirst.entries()) {
    if (i === 0 && e.type != null && CLOSED.has(e.type)) return 'taken';
    if (e.type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) return 'taken';
    if (e.type === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) completed = true;
    if (e.timerStartedId !== undefined) timersDone.add(e.timerStartedId);
    if (e.type === EventType.EVENT_TYPE_TIMER_STARTED && e.timerSummary === SETTLING_BEFORE_CARRY_OVER && !timersDone.has(e.id ?? '')) settling = true;
    if (e.signal?.name === 'revoked') {
      const p = e.signal.payload as { generation?: unknown; memberId?: unknown } | undefined;
      // A payload that is not JSON (a custom payload codec) counts as ours: wait for a task after it.
      if (p === undefined || (p.generation === revoke.generation && p.memberId === revoke.memberId)) return completed && !settling ? 'taken' : 'pending';
    }
  }
  return 'unknown';
}

function jsonOf(data: Uint8Array | null | undefined): unknown {
  try {
    return data ? JSON.parse(Buffer.from(data).toString('utf8')) : undefined;
  } catch {
    return undefined;
  }
}

function factsOf(e: temporal.api.history.v1.IHistoryEvent): HistoryEventFacts {
  const id = e.eventId?.toString();
  const sig = e.workflowExecutionSignaledEventAttributes;
  if (sig) return { type: e.eventType, id, signal: { name: sig.signalName ?? '', payload: jsonOf(sig.input?.payloads?.[0]?.data) } };
  if (e.timerStartedEventAttributes) {
    const summary = jsonOf(e.userMetadata?.summary?.data);
    return { type: e.eventType, id, timerSummary: typeof summary === 'string' ? summary : undefined };
  }
  const done = e.timerFiredEventAttributes?.startedEventId ?? e.timerCanceledEventAttributes?.startedEventId;
  return { type: e.eventType, id, timerStartedId: done?.toString() };
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
    const read: HistoryEventFacts[] = [];
    for (let page = 0; page < 4; page++) {
      try {
        const r = await client.workflowService.getWorkflowExecutionHistoryReverse({ namespace, execution: { workflowId }, maximumPageSize: 64, nextPageToken });
        read.push(...(r.history?.events ?? []).map(factsOf));
        nextPageToken = r.nextPageToken && r.nextPageToken.length > 0 ? r.nextPageToken : undefined;
      } catch (err) {
        if ((err as { code?: number }).code === 5) return false; // NOT_FOUND: gone, nothing to take in
        throw err;
      }
      const taken = revokeTakenIn(read, revoke);
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
