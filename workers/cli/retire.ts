import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Owner } from '../../activities/types';
import { ConfigError, KafkaFlowError } from '../../config/errors';
import type { RevokeSignal } from '../../workflows/partition/contract';
import type { PartitionWorkflowInput } from '../../workflows/partition-workflow';
import { retireSignal } from '../../workflows/partition-workflow';
import { searchAttributes } from '../../workflows/search-attributes';
import { connectTemporalClient } from '../connect/temporal-client';
import type * as RetireRunner from './retire-runner';

/**
 * A worker counts as alive when it polled its activity task queue this recently — unless it
 * stopped gracefully (its revoke signals say `shutdown`). An idle worker's polls are long polls of
 * up to a minute, so a worker that died without stopping counts as alive for up to this long after
 * (the server keeps its pollers for minutes).
 */
export const LIVE_POLL_WINDOW_MS = 75_000;

/** How long `retire` waits for the workflows to handle the retire signal before terminating the rest. */
export const DEFAULT_RETIRE_WAIT_MS = 20_000;

/** temporal.api.enums.v1's TaskQueueKind.NORMAL and TaskQueueType.ACTIVITY (@temporalio/proto is not a dependency of ours). */
const TASK_QUEUE_KIND_NORMAL = 1;
const TASK_QUEUE_TYPE_ACTIVITY = 2;

/** Phases in which a partition's owner is at work on it: its worker is alive. */
const OWNED_PHASES = new Set(['recovering', 'running', 'retrying']);

/** `retire` refused: workers of the flow are alive (they would start its partition workflows again). */
export class FlowWorkersAliveError extends KafkaFlowError {
  constructor(
    readonly flow: string,
    readonly live: readonly string[],
  ) {
    super(
      'FLOW_WORKERS_ALIVE',
      `flow "${flow}" still has live workers: ${live.join('; ')}. Stop them first (a worker that died without a graceful stop counts as alive ` +
        `for up to ${LIVE_POLL_WINDOW_MS / 1000} s), or retire --force (live workers start the partition workflows again)`,
    );
  }
}

export interface RetireOptions {
  /** Retire even while workers of the flow are alive. */
  readonly force?: boolean;
  /** How long to wait for the workflows to complete on the retire signal (then they are terminated). */
  readonly waitMs?: number;
  /** Run the flow's workflows in this process while waiting (default); false: only wait for a worker of the flow to. */
  readonly runWorkflows?: boolean;
}

export interface RetiredWorkflow {
  readonly workflowId: string;
  /** `completed`: a worker ran it to its end (phase `retired`); `terminated`: no worker did within the wait. */
  readonly outcome: 'completed' | 'terminated';
}

/**
 * Ends every running partition workflow of a decommissioned flow: each is signalled `retire` (it
 * cancels its activities, shows `retired` and completes), run here on the flow's workflow task
 * queue (retire-runner.ts: only the flow's workers poll it, and none is left); those not ended
 * within the wait are terminated. Refuses while workers of the flow are
 * alive — an owner of its partitions (phase), or a process that owned one and still polls its
 * task queue — unless forced.
 */
export async function retireFlow(flow: string, options: RetireOptions = {}): Promise<RetiredWorkflow[]> {
  // A flow's name as defineFlow allows it (it goes into the list query).
  if (!/^[A-Za-z0-9._-]+$/.test(flow)) throw new ConfigError(`retire: "${flow}" is not a flow name (letters, digits, ".", "_" and "-" only)`);
  const { client, close } = await connectTemporalClient();
  try {
    const workflows = await runningWorkflows(client, flow);
    if (!options.force) {
      const live = await liveWorkers(client, workflows);
      if (live.length > 0) throw new FlowWorkersAliveError(flow, live);
    }
    const handles = workflows.map((wf) => client.workflow.getHandle(wf.workflowId));
    await Promise.all(handles.map((h) => h.signal(retireSignal)));
    const deadline = Date.now() + (options.waitMs ?? DEFAULT_RETIRE_WAIT_MS);
    const open = new Set(handles.map((h) => h.workflowId));
    const ended = (async () => {
      while (open.size > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        for (const h of handles.filter((x) => open.has(x.workflowId))) {
          if ((await h.describe()).status.name !== 'RUNNING') open.delete(h.workflowId);
        }
      }
    })();
    if (handles.length > 0 && options.runWorkflows !== false) {
      // No worker of the flow polls its workflow task queue any more: this process runs the workflows to their end.
      const runner = require('./retire-runner') as typeof RetireRunner;
      await runner.runFlowWorkflowsUntil(flow, ended);
    }
    await ended;
    await Promise.all(
      handles.filter((h) => open.has(h.workflowId)).map((h) => h.terminate(`retired by kafka-flow-temporal retire: no worker ran the retire signal`)),
    );
    return handles.map((h) => ({ workflowId: h.workflowId, outcome: open.has(h.workflowId) ? 'terminated' : 'completed' }));
  } finally {
    await close();
  }
}

async function runningWorkflows(client: Client, flow: string): Promise<WorkflowExecutionInfo[]> {
  const out: WorkflowExecutionInfo[] = [];
  for await (const wf of client.workflow.list({ query: `KafkaFlow = "${flow}" AND ExecutionStatus = "Running"` })) out.push(wf);
  return out;
}

/**
 * The flow's live workers, one line each: the owners at work on a partition (by its phase), and
 * the processes that owned one of its partitions (their task queues, from the workflows'
 * histories: the assignments and what a continued run carried) and are still alive (workerLiveness).
 */
async function liveWorkers(client: Client, workflows: readonly WorkflowExecutionInfo[]): Promise<string[]> {
  const live: string[] = [];
  for (const wf of workflows) {
    const phase = wf.typedSearchAttributes.get(searchAttributes.phase);
    if (phase !== undefined && OWNED_PHASES.has(phase)) live.push(`${wf.workflowId} is ${phase} on member ${wf.typedSearchAttributes.get(searchAttributes.owner)}`);
  }
  const owners: Owner[] = [];
  const shutDown = new Set<string>();
  for (const wf of workflows) {
    const seen = await ownersOf(client, wf.workflowId);
    owners.push(...seen.owners);
    for (const m of seen.shutDown) shutDown.add(m);
  }
  const lastPoll = new Map<string, number>();
  for (const name of new Set(owners.map((o) => o.taskQueue))) {
    const { pollers } = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name, kind: TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TASK_QUEUE_TYPE_ACTIVITY,
    });
    lastPoll.set(name, Math.max(0, ...(pollers ?? []).map((p) => Number(p.lastAccessTime?.seconds ?? 0) * 1000)));
  }
  live.push(...workerLiveness(owners, shutDown, lastPoll, Date.now()));
  return live;
}

/**
 * Which of the workers that owned the flow's partitions (one activity task queue per process) are
 * alive, one line each: one that stopped gracefully — some member it joined as signalled a revoke
 * with reason `shutdown`, and a stopping process takes no new assignment — is not, whatever its
 * pollers; any other counts as alive while it polled within LIVE_POLL_WINDOW_MS (a process killed
 * without a stop still has pollers listed for up to a minute).
 */
export function workerLiveness(owners: readonly Owner[], shutDown: ReadonlySet<string>, lastPoll: ReadonlyMap<string, number>, now: number): string[] {
  const live: string[] = [];
  const queues = new Map<string, Owner[]>();
  for (const o of owners) queues.set(o.taskQueue, [...(queues.get(o.taskQueue) ?? []), o]);
  for (const [name, members] of queues) {
    if (members.some((o) => shutDown.has(o.memberId))) continue;
    const last = lastPoll.get(name) ?? 0;
    if (now - last < LIVE_POLL_WINDOW_MS) live.push(`worker ${name.split('/').slice(-2).join('/')} polled ${Math.max(0, Math.round((now - last) / 1000))} s ago`);
  }
  return live;
}

/**
 * Every owner a partition workflow's current run knows of (carried from the run before, and
 * assigned since), and the members that stopped gracefully (a `shutdown` revoke, or carried as `idle`).
 */
async function ownersOf(client: Client, workflowId: string): Promise<{ owners: Owner[]; shutDown: string[] }> {
  const owners: Owner[] = [];
  const shutDown: string[] = [];
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  for (const e of events) {
    const started = e.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (started) {
      const input = defaultPayloadConverter.fromPayload<PartitionWorkflowInput>(started);
      owners.push(...(input.carried?.ownerHistory ?? []), ...(input.carried?.pending ?? []));
      // A run continued as new between owners after a graceful stop carries its owner as `idle`:
      // that owner's `shutdown` revoke is in the run before.
      if (input.carried?.phase === 'idle' && input.carried.owner) shutDown.push(input.carried.owner.memberId);
    }
    const signal = e.workflowExecutionSignaledEventAttributes;
    const payload = signal?.input?.payloads?.[0];
    if (signal?.signalName === 'assigned' && payload) owners.push(defaultPayloadConverter.fromPayload<Owner>(payload));
    if (signal?.signalName === 'revoked' && payload) {
      const revoke = defaultPayloadConverter.fromPayload<RevokeSignal>(payload);
      if (revoke.reason === 'shutdown') shutDown.push(revoke.memberId);
    }
  }
  return { owners, shutDown };
}
