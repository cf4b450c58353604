import { readEnv } from '../config/env';
import { type PartitionStatus, statusQuery } from '../workflows/partitionWorkflow';
import { connectTemporal } from './temporalConnection';

/** Every partition workflow of a flow, with its status query's answer (running workflows only). */
export async function flowStatus(flowName: string): Promise<PartitionStatus[]> {
  const temporal = await connectTemporal(readEnv());
  try {
    const out: PartitionStatus[] = [];
    for await (const wf of temporal.client.workflow.list({ query: `KafkaFlow = "${flowName}" AND ExecutionStatus = "Running"` })) {
      const status = await temporal.client.workflow.getHandle(wf.workflowId).query(statusQuery);
      out.push(status);
    }
    return out.sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition);
  } finally {
    await temporal.close();
  }
}

const ago = (at: number | undefined): string => (at === undefined ? '-' : `${Math.round((Date.now() - at) / 1000)} s ago`);

export function formatStatus(rows: PartitionStatus[]): string {
  const header = ['topic', 'partition', 'phase', 'generation', 'owner', 'committed', 'lag', 'keys', 'last persist', 'fences'];
  const lines = rows.map((s) => [
    s.topic,
    String(s.partition),
    s.phase,
    String(s.owner?.generation ?? '-'),
    s.owner ? s.owner.taskQueue.split('/').slice(-2).join('/') : '-',
    s.committedOffset ?? '-',
    s.lag === undefined ? '-' : String(s.lag),
    s.liveKeys === undefined ? '-' : String(s.liveKeys),
    ago(s.lastPersist?.at),
    String(s.counters.fences),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  return [header, ...lines].map((l) => l.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

