import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Owner, PartitionRef } from '../../activities/types';
import type { Logger } from '../../core/logger';
import {
  assignedSignal,
  type PartitionWorkflowInput,
  partitionWorkflow,
  partitionWorkflowId,
  type RestoringSignal,
  type RevokeSignal,
  restoringSignal,
  revokedSignal,
} from '../../workflows/partition-workflow';
import { searchAttributes } from '../../workflows/search-attributes';
import { terminateIfStuck } from './stuck-workflows';
import { flowWorkflowTaskQueue } from './task-queues';

/**
 * How a worker process tells the partition workflows about its group membership: Temporal signals
 * in a worker (TemporalPartitionSignals), a recording fake in the runtime's unit tests.
 */
export interface PartitionSignals {
  /** This process was assigned the partition: starts its workflow if it is not running. */
  assigned(input: PartitionWorkflowInput, owner: Owner): Promise<void>;
  revoked(ref: PartitionRef, signal: RevokeSignal): Promise<void>;
  /** How far this process's recovery of the partition is (sent while a long recovery runs). */
  restoring?(ref: PartitionRef, signal: RestoringSignal): Promise<void>;
  /**
   * The watchdog's look at a partition held here but not folding: terminates its workflow's run
   * if every workflow task of it fails on a Temporal SDK state-machine error (stuck-workflows.ts),
   * so that the assignment signalled next starts a fresh run. True when it terminated one.
   */
  unstick?(ref: PartitionRef): Promise<boolean>;
}

export class TemporalPartitionSignals implements PartitionSignals {
  /** Partition workflows this process has seen on their flow's task queue (or started there). */
  private readonly onFlowQueue = new Set<string>();

  constructor(
    private readonly client: Client,
    private readonly log?: Logger,
  ) {}

  async assigned(input: PartitionWorkflowInput, owner: Owner): Promise<void> {
    const workflowId = partitionWorkflowId(input);
    const taskQueue = flowWorkflowTaskQueue(input.flow);
    const checked = this.onFlowQueue.has(workflowId) || (await this.moveToFlowQueue(workflowId, taskQueue));
    await this.client.workflow.signalWithStart(partitionWorkflow, {
      workflowId,
      taskQueue,
      args: [input],
      signal: assignedSignal,
      signalArgs: [owner],
      typedSearchAttributes: [
        { key: searchAttributes.flow, value: input.flow },
        { key: searchAttributes.topic, value: input.topic },
        { key: searchAttributes.partition, value: input.partition },
      ],
    });
    if (checked) this.onFlowQueue.add(workflowId);
  }

  async revoked(ref: PartitionRef, signal: RevokeSignal): Promise<void> {
    await this.client.workflow.getHandle(partitionWorkflowId(ref)).signal(revokedSignal, signal);
  }

  async restoring(ref: PartitionRef, signal: RestoringSignal): Promise<void> {
    await this.client.workflow.getHandle(partitionWorkflowId(ref)).signal(restoringSignal, signal);
  }

  async unstick(ref: PartitionRef): Promise<boolean> {
    const workflowId = partitionWorkflowId(ref);
    try {
      const { terminated, error } = await terminateIfStuck(this.client, this.client.options.namespace, workflowId);
      if (terminated) {
        this.log?.warn({ workflowId, error }, 'partition workflow stuck: every workflow task of its run failed on a Temporal SDK state-machine error; the run was terminated, and the assignment starts a fresh one that recovers the partition');
      }
      return terminated;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      this.log?.warn({ err, workflowId }, 'could not check whether the partition workflow is stuck; the assignment goes ahead');
      return false;
    }
  }

  /**
   * A partition workflow running on another task queue than its flow's (started by a version that
   * ran every flow's workflows on one shared queue, which no worker polls any more) is terminated,
   * so that the assignment that follows starts it afresh on the flow's queue: a fresh run recovers
   * the partition from its persisted state, as after any closed run. Once per workflow per process;
   * a failed look is not fatal (the assignment goes ahead, the next one looks again). True once
   * the workflow is known to be on the flow's queue or not running.
   */
  private async moveToFlowQueue(workflowId: string, taskQueue: string): Promise<boolean> {
    const handle = this.client.workflow.getHandle(workflowId);
    try {
      const d = await handle.describe();
      if (d.status.name !== 'RUNNING' || d.taskQueue === taskQueue) return true;
      await handle.terminate(`moved to the flow's own workflow task queue ${taskQueue} (it ran on ${d.taskQueue})`);
      this.log?.warn({ workflowId, from: d.taskQueue, to: taskQueue, runId: d.runId }, "partition workflow moved to its flow's workflow task queue: the old run terminated, a fresh run recovers the partition");
      return true;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return true;
      this.log?.warn({ err, workflowId }, "could not check the partition workflow's task queue; the assignment goes ahead");
      return false;
    }
  }
}
