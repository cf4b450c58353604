import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
import { partitionWorkflowId } from '../../../workflows/partition-workflow';
import { eventually, FlowCluster } from './harness';

// The last worker of a flow stops gracefully while folding: its partition workflows must have
// handled the revoke before its workflow worker goes, since nothing else polls their task queue
// afterwards. So the moment it has exited — no worker left to run a workflow task, so what is not
// done now stays undone — every partition workflow is `idle`, with no workflow task and no activity
// pending (its activities all ran on the stopped worker's queue).
test('a lone worker stopped under load leaves every partition idle with nothing pending, the moment it exits', async () => {
  const cluster = new FlowCluster(6, { persistEveryMs: 500 });
  try {
    await cluster.start();
    await cluster.produce(3000);
    const metricsPort = await freePort();
    const a = cluster.startWorker('a', { KFT_METRICS_PORT: String(metricsPort) });
    await cluster.untilRunningOn(1, 'a runs all 6 partitions');
    // The snapshot topic is checked once, from the worker's start (backend.prepare), and before any
    // partition is fenced: the recoveries, which start at the join while the Temporal workers are
    // still starting, wait for that check instead of making their own.
    const messages = cluster.logLines<{ msg: string }>(a).map((l) => l.msg);
    expect(messages.filter((m) => m === 'snapshot topic ready')).toHaveLength(1);
    expect(messages.indexOf('snapshot topic ready')).toBeLessThan(messages.indexOf('snapshot producer initialized (fence)'));
    // The Kafka backend's own metrics are on the worker's /metrics (its snapshot transactions).
    const committed = () => workerMetric(metricsPort, 'kafka_flow_snapshot_transactions_total', { outcome: 'committed' });
    await eventually('snapshot transactions counted on the worker\'s /metrics', async () => (await committed()) > 0, 30_000);
    await cluster.produce(6000); // still folding when the stop comes
    expect(await cluster.stop(a)).toBe(0);

    const client = await cluster.temporal();
    const partitions = await Promise.all(
      Array.from({ length: cluster.partitions }, async (_, partition) => {
        const d = await client.workflow.getHandle(partitionWorkflowId({ flow: cluster.names.name, topic: cluster.names.topic, partition })).describe();
        const phase = d.searchAttributes.KafkaFlowPhase;
        return {
          partition,
          phase: Array.isArray(phase) ? String(phase[0]) : String(phase),
          pendingWorkflowTask: Boolean(d.raw.pendingWorkflowTask),
          pendingActivities: (d.raw.pendingActivities ?? []).map((p) => p.activityType?.name),
        };
      }),
    );
    expect(partitions).toEqual(
      Array.from({ length: cluster.partitions }, (_, partition) => ({ partition, phase: 'idle', pendingWorkflowTask: false, pendingActivities: [] })),
    );
    const handled = cluster.logLines<{ msg: string; workflows?: number }>(a).find((l) => l.msg === 'the partition workflows handled the revoke');
    expect(handled?.workflows).toBe(cluster.partitions);
  } finally {
    await cluster.close();
  }
}, 180_000);
