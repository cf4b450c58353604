import { partitionWorkflow, partitionWorkflowId } from '../../../workflows/partition-workflow';
import { searchAttributes } from '../../../workflows/search-attributes';
import { flowWorkflowTaskQueue, LEGACY_WORKFLOW_TASK_QUEUE } from '../../../workers/runtime/task-queues';
import { FlowCluster } from './harness';

// Each flow's partition workflows run on the flow's own workflow task queue. A partition workflow
// an earlier version started on the queue every flow shared (which no worker polls now) would hold
// its partition forever: the worker assigned the partition terminates it and starts a fresh run
// on the flow's queue, which recovers the partition from its persisted state.
test("a partition workflow left on the shared task queue of earlier versions is moved to its flow's queue at its assignment, and the partition goes on exactly", async () => {
  const cluster = new FlowCluster(2);
  try {
    const client = await cluster.temporal();
    await cluster.start();
    await cluster.produce(300);
    const { name: flow, topic } = cluster.names;
    const workflowId = partitionWorkflowId({ flow, topic, partition: 1 });
    const legacy = await client.workflow.start(partitionWorkflow, {
      workflowId,
      taskQueue: LEGACY_WORKFLOW_TASK_QUEUE,
      args: [{ flow, topic, partition: 1, persistEveryMs: 1_000 }],
      typedSearchAttributes: [
        { key: searchAttributes.flow, value: flow },
        { key: searchAttributes.topic, value: topic },
        { key: searchAttributes.partition, value: 1 },
      ],
    });

    const w = cluster.startWorker('w');
    await cluster.untilRunningOn(1, 'every partition running on the worker');
    const current = await client.workflow.getHandle(workflowId).describe();
    expect(current.runId).not.toBe(legacy.firstExecutionRunId);
    expect(current.taskQueue).toBe(flowWorkflowTaskQueue(flow));
    expect((await client.workflow.getHandle(workflowId, legacy.firstExecutionRunId).describe()).status.name).toBe('TERMINATED');
    expect((await client.workflow.getHandle(partitionWorkflowId({ flow, topic, partition: 0 })).describe()).taskQueue).toBe(flowWorkflowTaskQueue(flow));
    expect(cluster.log(w)).toContain("partition workflow moved to its flow's workflow task queue");

    await cluster.produce(300);
    await cluster.untilCaughtUp('caught up after the move');
    expect(await cluster.stop(w)).toBe(0);
    expect(await cluster.persisted()).toEqual(await cluster.reference());
  } finally {
    await cluster.close();
  }
}, 180_000);
