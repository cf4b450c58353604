import type { Client } from '@temporalio/client';
import type { Owner, PartitionRef } from '../../activities/types';
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
import { WORKFLOW_TASK_QUEUE } from './task-queues';

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
}

export class TemporalPartitionSignals implements PartitionSignals {
  constructor(private readonly client: Client) {}

  async assigned(input: PartitionWorkflowInput, owner: Owner): Promise<void> {
    await this.client.workflow.signalWithStart(partitionWorkflow, {
      workflowId: partitionWorkflowId(input),
      taskQueue: WORKFLOW_TASK_QUEUE,
      args: [input],
      signal: assignedSignal,
      signalArgs: [owner],
      typedSearchAttributes: [
        { key: searchAttributes.flow, value: input.flow },
        { key: searchAttributes.topic, value: input.topic },
        { key: searchAttributes.partition, value: input.partition },
      ],
    });
  }

  async revoked(ref: PartitionRef, signal: RevokeSignal): Promise<void> {
    await this.client.workflow.getHandle(partitionWorkflowId(ref)).signal(revokedSignal, signal);
  }

  async restoring(ref: PartitionRef, signal: RestoringSignal): Promise<void> {
    await this.client.workflow.getHandle(partitionWorkflowId(ref)).signal(restoringSignal, signal);
  }
}
