import { randomUUID } from 'node:crypto';
import os from 'node:os';

/** The shared task queue every worker process polls for partition workflows. */
export const WORKFLOW_TASK_QUEUE = 'kafka-flow-temporal';

/**
 * A process's own activity task queue (the worker-specific task queue pattern): activities of the
 * partitions it owns run here and nowhere else. Unique per process start, so a restarted process
 * never picks up its predecessor's work.
 */
export function processTaskQueue(flow: string): string {
  return `kafka-flow-temporal/${flow}/${os.hostname()}/${process.pid}-${randomUUID().slice(0, 8)}`;
}
