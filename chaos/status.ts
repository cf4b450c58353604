// Each partition's workflow status, queried from Temporal directly (for evidence in the report).
import { connectTemporal, type TemporalConnections } from '../workers/connect/temporal-connection';
import { type PartitionStatus, partitionWorkflowId, statusQuery } from '../workflows/partition-workflow';
import type { Mode } from './modes';
import { withTimeout } from './sampler';
import { PARTITIONS } from './settings';

let temporalForStatus: Promise<TemporalConnections> | undefined;

/** Each partition's status query, over one connection kept for the run. */
export async function statuses(m: Mode): Promise<Array<PartitionStatus | undefined>> {
  temporalForStatus ??= connectTemporal();
  let temporal: TemporalConnections;
  try {
    temporal = await withTimeout(temporalForStatus, 5_000);
  } catch (err) {
    temporalForStatus = undefined;
    throw err;
  }
  return Promise.all(
    Array.from({ length: PARTITIONS }, (_, partition) =>
      withTimeout(temporal.client.workflow.getHandle(partitionWorkflowId({ flow: m.name, topic: m.topic, partition })).query(statusQuery), 3_000).catch(
        () => undefined,
      ),
    ),
  );
}

export const statusLine = (s: PartitionStatus | undefined, p: number) =>
  s
    ? `p${p} ${s.phase} gen=${s.owner?.generation ?? '-'} owner=${s.owner?.taskQueue.split('/').slice(-2).join('/') ?? '-'} committed=${s.committedOffset ?? '-'} lag=${s.lag ?? '-'}${s.lastError ? ` lastError=${s.lastError.slice(0, 300)}` : ''}`
    : `p${p} (no answer)`;

/** Closes the status connection kept for the run. */
export async function closeStatuses(): Promise<void> {
  await temporalForStatus?.then((t) => t.close()).catch(() => undefined);
  temporalForStatus = undefined;
}
