// What a window of time added to workflow histories: each workflow's events whose time falls in
// the window, by event type, summed over its runs — continue-as-new followed back from the current
// run through each run's first event (as bench:orchestration counts a partition's events), and no
// further back than the window.
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';

export interface WindowEvents {
  /** Events in the window. */
  events: number;
  /** Events in the window by type, e.g. `WORKFLOW_TASK_COMPLETED`. */
  byType: Record<string, number>;
  /** The runs read (the current one and those before it that reach into the window). */
  runs: number;
}

const EVENT_TYPE = temporal.api.enums.v1.EventType;

/** The events of `workflowId` with fromMs <= event time < toMs, over its runs. */
export async function historyEventsBetween(client: Client, workflowId: string, fromMs: number, toMs: number): Promise<WindowEvents> {
  const out: WindowEvents = { events: 0, byType: {}, runs: 0 };
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId && out.runs < 1_000) {
    const history: temporal.api.history.v1.IHistory = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events = history.events ?? [];
    out.runs++;
    for (const e of events) {
      const at = tsToMs(e.eventTime);
      if (at < fromMs || at >= toMs) continue;
      const type = (EVENT_TYPE[e.eventType ?? 0] ?? String(e.eventType)).replace(/^EVENT_TYPE_/, '');
      out.byType[type] = (out.byType[type] ?? 0) + 1;
      out.events++;
    }
    const first = events[0];
    if (!first || tsToMs(first.eventTime) < fromMs) break; // this run began before the window
    runId = first.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return out;
}

/** Per type, the sum over `windows`. */
export function eventsByType(windows: readonly WindowEvents[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const w of windows) for (const [type, n] of Object.entries(w.byType)) total[type] = (total[type] ?? 0) + n;
  return total;
}
