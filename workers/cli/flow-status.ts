import type { WorkflowExecutionInfo } from '@temporalio/client';
import { type PartitionStatus, statusQuery } from '../../workflows/partition-workflow';
import { searchAttributes } from '../../workflows/search-attributes';
import { DEFAULT_QUERY_TIMEOUT_MS } from './status-timeouts';
import { connectTemporalClient } from '../connect/temporal-client';

/** How long `status` waits for the partition workflows' status queries (all run at once): status-timeouts.ts. */
export { DEFAULT_QUERY_TIMEOUT_MS };
/** How long the workflow listing may take. */
const LIST_TIMEOUT_MS = 5_000;

/** A standby copy of a partition on a worker (asked of the workers at their HTTP addresses). */
export interface StandbyView {
  /** The worker keeping it: its activity task queue. */
  readonly worker: string;
  readonly checkpoint?: string;
  readonly lag?: number;
}

/** A partition whose status query a worker answered: the live figures, and its standby copies when any worker reports one. */
export type QueriedStatus = PartitionStatus & { readonly source: 'query'; readonly standbys?: readonly StandbyView[] };

/**
 * A partition whose status query got no answer (no worker runs, or none answered in time): what
 * the workflow last recorded in its search attributes.
 */
export interface SearchAttributeStatus {
  readonly source: 'search-attributes';
  readonly workflowId: string;
  readonly flow: string;
  readonly topic: string;
  readonly partition: number;
  /** KafkaFlowPhase; `unknown` when the workflow has not recorded one yet. */
  readonly phase: string;
  /** KafkaGeneration (absent when not owned). */
  readonly generation?: number;
  /** KafkaOwner: the owner's Kafka group member id (absent when not owned). */
  readonly owner?: string;
  /** Why the query gave nothing. */
  readonly queryError: string;
}

export type StatusRow = QueriedStatus | SearchAttributeStatus;

export interface FlowStatusOptions {
  /** Deadline of the status queries; default 2 s. */
  readonly queryTimeoutMs?: number;
  /** Also stop waiting for answers at this time (ms since epoch), but give the queries ≥ 1 s. */
  readonly answerBy?: number;
}

const MIN_QUERY_TIMEOUT_MS = 1_000;

/**
 * Every running partition workflow of a flow: its status query's answer, or, for the workflows
 * whose query no worker answered within the deadline, their search attributes. Never hangs on a
 * flow without workers.
 */
export async function flowStatusRows(flowName: string, options: FlowStatusOptions = {}): Promise<StatusRow[]> {
  const queryTimeoutMs = options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
  const { client } = await connectTemporalClient();
  // Queries given up by withTimeout below may still be in flight, retried by gRPC until their
  // deadline: closing the channel under them makes grpc-js throw "Channel has been shut down" from a
  // timer — an uncaught exception that ended the example's driver on a loaded machine.
  const calls: Promise<unknown>[] = [];
  try {
    const workflows = await client.connection.withDeadline(Date.now() + LIST_TIMEOUT_MS, async () => {
      const out: WorkflowExecutionInfo[] = [];
      for await (const wf of client.workflow.list({ query: `KafkaFlow = "${flowName}" AND ExecutionStatus = "Running"` })) out.push(wf);
      return out;
    });
    let deadline = Date.now() + queryTimeoutMs;
    if (options.answerBy !== undefined) deadline = Math.max(Date.now() + MIN_QUERY_TIMEOUT_MS, Math.min(deadline, options.answerBy));
    const rows = await Promise.all(
      workflows.map(async (wf): Promise<StatusRow> => {
        try {
          const call = client.connection.withDeadline(deadline, () => client.workflow.getHandle(wf.workflowId, wf.runId).query(statusQuery));
          calls.push(call.catch(() => undefined));
          const status = await withTimeout(call, deadline - Date.now() + 500);
          return { ...status, source: 'query' };
        } catch (err) {
          return fromSearchAttributes(flowName, wf, err);
        }
      }),
    );
    const withStandbys = await addStandbys(flowName, rows, deadline);
    return withStandbys.sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition);
  } finally {
    await Promise.race([Promise.allSettled(calls), new Promise((r) => setTimeout(r, CLOSE_GRACE_MS).unref())]);
    await client.connection.close();
  }
}

/**
 * The standby copies the owners report (`GET /flows/<flow>/standbys` at each owner's HTTP address,
 * by the deadline), added to the rows of their partitions. A worker without an HTTP address, or
 * one that does not answer, adds nothing.
 */
async function addStandbys(flowName: string, rows: StatusRow[], deadline: number): Promise<StatusRow[]> {
  const workers = new Map<string, string>();
  for (const r of rows) if (r.source === 'query' && r.owner?.httpAddress) workers.set(r.owner.httpAddress, r.owner.taskQueue);
  if (workers.size === 0) return rows;
  const byPartition = new Map<string, StandbyView[]>();
  const timeoutMs = Math.max(500, deadline - Date.now());
  await Promise.all(
    [...workers].map(async ([address, worker]) => {
      try {
        const res = await fetch(`${address}/flows/${encodeURIComponent(flowName)}/standbys`, { signal: AbortSignal.timeout(timeoutMs) });
        if (!res.ok) return;
        const body = (await res.json()) as { standbys?: Array<{ topic: string; partition: number; checkpoint?: string; lag?: number }> };
        for (const c of body.standbys ?? []) {
          const k = `${c.topic}\u0000${c.partition}`;
          const list = byPartition.get(k) ?? [];
          list.push({ worker, ...(c.checkpoint !== undefined ? { checkpoint: c.checkpoint } : {}), ...(c.lag !== undefined ? { lag: c.lag } : {}) });
          byPartition.set(k, list);
        }
      } catch {
        // not answering: its copies are not shown
      }
    }),
  );
  if (byPartition.size === 0) return rows;
  return rows.map((r) => {
    const standbys = r.source === 'query' ? byPartition.get(`${r.topic}\u0000${r.partition}`) : undefined;
    return standbys ? { ...r, standbys } : r;
  });
}

/** How long a status read waits, at most, for queries it gave up on to end before it closes its connection. */
const CLOSE_GRACE_MS = 5_000;

/**
 * Every running partition workflow of a flow with its status query's answer. Strict: throws when a
 * workflow's query got no answer within `queryTimeoutMs` (default 10 s) — for callers that need
 * the live figures (tests, tools); the CLI uses flowStatusRows.
 */
export async function flowStatus(flowName: string, options: FlowStatusOptions = {}): Promise<PartitionStatus[]> {
  const rows = await flowStatusRows(flowName, { queryTimeoutMs: options.queryTimeoutMs ?? 10_000 });
  const missing = rows.filter((r): r is SearchAttributeStatus => r.source === 'search-attributes');
  if (missing.length > 0) {
    throw new Error(`no answer to the status query of ${missing.map((m) => `${m.workflowId} (${m.queryError})`).join(', ')}`);
  }
  return rows.map(({ source: _, ...status }) => status as PartitionStatus);
}

function fromSearchAttributes(flow: string, wf: WorkflowExecutionInfo, err: unknown): SearchAttributeStatus {
  const sa = wf.typedSearchAttributes;
  // kafka-flow/<flow>/<topic>/<partition>: the id is the fallback when the attributes are not set yet.
  const idParts = wf.workflowId.split('/');
  const generation = sa.get(searchAttributes.generation);
  const owner = sa.get(searchAttributes.owner);
  return {
    source: 'search-attributes',
    workflowId: wf.workflowId,
    flow,
    topic: sa.get(searchAttributes.topic) ?? idParts.slice(2, -1).join('/'),
    partition: sa.get(searchAttributes.partition) ?? Number(idParts[idParts.length - 1]),
    phase: sa.get(searchAttributes.phase) ?? 'unknown',
    ...(generation !== undefined && generation >= 0 ? { generation } : {}),
    ...(owner ? { owner } : {}),
    queryError: queryErrorText(err),
  };
}

/** Why a status query gave nothing, in one line. */
export function queryErrorText(err: unknown): string {
  const e = err as { code?: number; details?: string; message?: string; cause?: { code?: number } } | undefined;
  // gRPC DEADLINE_EXCEEDED (4), or our own timer: nobody answered.
  if (e?.code === 4 || e?.cause?.code === 4 || e?.message === 'timeout') return 'no answer within the deadline';
  return (e?.details || e?.message || String(err)).split('\n')[0]!;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const ago = (at: number | undefined): string => (at === undefined ? '-' : `${Math.round((Date.now() - at) / 1000)} s ago`);

/** The hint printed when some rows come from search attributes (undefined when none do). */
export function fallbackHint(rows: readonly StatusRow[]): string | undefined {
  const fallback = rows.filter((r) => r.source === 'search-attributes').length;
  if (fallback === 0) return undefined;
  const which = fallback === rows.length ? '' : ` for ${fallback} of ${rows.length} partitions`;
  return `no worker answered the status query${which}; phases from search attributes (start a worker for live figures)`;
}

/** `<worker> lag N` per standby copy, comma-separated; `-` for none. */
function standbyText(standbys: readonly StandbyView[] | undefined): string {
  if (!standbys || standbys.length === 0) return '-';
  return standbys.map((s) => `${s.worker.split('/').slice(-2).join('/')} lag ${s.lag ?? '?'}`).join(', ');
}

export function formatStatus(rows: readonly (StatusRow | PartitionStatus)[]): string {
  const header = ['topic', 'partition', 'phase', 'generation', 'owner', 'committed', 'lag', 'keys', 'last persist', 'fences', 'outputs'];
  const anyFallback = rows.some((r) => 'source' in r && r.source === 'search-attributes');
  const anyStandby = rows.some((r) => 'standbys' in r && r.standbys !== undefined);
  if (anyStandby) header.push('standby');
  if (anyFallback) header.push('from');
  const lines = rows.map((r) => {
    if ('source' in r && r.source === 'search-attributes') {
      const line = [r.topic, String(r.partition), r.phase, String(r.generation ?? '-'), r.owner ?? '-', '-', '-', '-', '-', '-', '-'];
      return [...line, ...(anyStandby ? ['-'] : []), 'search attributes'];
    }
    const s = r as PartitionStatus;
    const line = [
      s.topic,
      String(s.partition),
      // A long recovery's share read so far, from its owner's last report.
      s.phase === 'recovering' && s.restoring?.fraction !== undefined ? `recovering ${Math.floor(s.restoring.fraction * 100)} %` : s.phase,
      String(s.owner?.generation ?? '-'),
      s.owner ? s.owner.taskQueue.split('/').slice(-2).join('/') : '-',
      s.committedOffset ?? '-',
      s.lag === undefined ? '-' : String(s.lag),
      s.liveKeys === undefined ? '-' : String(s.liveKeys),
      ago(s.lastPersist?.at),
      String(s.counters.fences),
      String(s.counters.outputs ?? 0),
    ];
    if (anyStandby) line.push(standbyText((r as QueriedStatus).standbys));
    return anyFallback ? [...line, 'query'] : line;
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  return [header, ...lines].map((l) => l.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
