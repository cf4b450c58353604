import { randomUUID } from 'node:crypto';
import os from 'node:os';

/**
 * The task queue a flow's partition workflows run on, polled by that flow's worker processes only:
 * a flow's workflow tasks never wait behind another flow's (or behind the tasks of workflows a
 * retired or abandoned flow left running in the namespace, which a worker would otherwise replay
 * in full at every task while its own partitions wait to move).
 */
export function flowWorkflowTaskQueue(flow: string): string {
  return `kafka-flow-temporal/${flow}`;
}

/**
 * The task queue every flow's partition workflows shared before each flow had its own. A worker
 * moves a partition workflow it finds there to its flow's queue (PartitionWorkflowQueues).
 */
export const LEGACY_WORKFLOW_TASK_QUEUE = 'kafka-flow-temporal';

/**
 * A process's own activity task queue (the worker-specific task queue pattern): activities of the
 * partitions it owns run here and nowhere else. Unique per process start, so a restarted process
 * never picks up its predecessor's work.
 */
export function processTaskQueue(flow: string): string {
  return `kafka-flow-temporal/${flow}/${os.hostname()}/${process.pid}-${randomUUID().slice(0, 8)}`;
}
