import { partitionWorkflowId } from '../../../workflows/partition-workflow';
import { eventually, FlowCluster } from './harness';

// Self-healing of the orchestration itself: a partition workflow that closes while its owner still
// holds the partition (an operator terminated it here; a run that cannot replay its own history
// fails on its nondeterminism error the same way) is started afresh by the owner's watchdog
// (KFT_REASSERT_AFTER_MS) and recovers the partition from its persisted state: nothing lost.
test('a partition workflow closed under a running worker is started afresh and the partition goes on exactly', async () => {
  const cluster = new FlowCluster(2, { env: { KFT_REASSERT_AFTER_MS: '2000' } });
  try {
    const client = await cluster.temporal();
    await cluster.start();
    await cluster.produce(500);
    const w = cluster.startWorker('w');
    await cluster.untilRunningOn(1, 'running on the worker');
    await cluster.untilCaughtUp('caught up');

    const handle = client.workflow.getHandle(partitionWorkflowId({ flow: cluster.names.name, topic: cluster.names.topic, partition: 1 }));
    const closedRun = (await handle.describe()).runId;
    await handle.terminate('test: a closed partition workflow');
    await cluster.produce(500);

    // A new run of the same workflow id, running on the same worker, and everything folded.
    await eventually('a new run of the closed workflow', async () => {
      const d = await client.workflow.getHandle(handle.workflowId).describe();
      return d.runId !== closedRun && d.status.name === 'RUNNING' ? d : undefined;
    }, 60_000);
    await cluster.untilRunningOn(1, 'running again on the same worker');
    await cluster.untilCaughtUp('caught up after the restart');
    expect(cluster.log(w)).toContain('signalling their assignment again');
    expect(await cluster.stop(w)).toBe(0);
    expect(await cluster.persisted()).toEqual(await cluster.reference());
  } finally {
    await cluster.close();
  }
}, 240_000);
