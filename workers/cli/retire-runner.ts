import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { readWorkerEnv } from '../../config/env';
import { silentLogger } from '../../core/logger';
import { workflowBundleBuilder } from '../bundle/workflow-bundle-build';
import { loadWorkflowBundle } from '../bundle/workflow-bundle';
import { connectTemporal } from '../connect/temporal-connection';
import { flowWorkflowTaskQueue } from '../runtime/task-queues';

/**
 * Runs a retired flow's partition workflows in this process until `until` settles. Only the
 * flow's own workers poll its workflow task queue, and `retire` runs when none is left: without
 * this, nothing would run the workflows' answer to the retire signal (cancel their activities,
 * show `retired`, complete). Loaded only by `retire` (the worker SDK).
 */
export async function runFlowWorkflowsUntil(flow: string, until: Promise<void>, env = readWorkerEnv()): Promise<void> {
  try {
    // The CLI's output is the retire report: the SDK says only what went wrong.
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // installed already (a test's process)
  }
  const temporal = await connectTemporal(env);
  try {
    const [connection, bundle] = await Promise.all([
      temporal.connect(),
      loadWorkflowBundle({
        workflowsPath: require.resolve('../../workflows'),
        cacheDir: env.workflowBundleDir,
        build: workflowBundleBuilder(Runtime.instance().logger),
        logger: silentLogger,
      }),
    ]);
    const worker = await Worker.create({
      connection,
      namespace: temporal.namespace,
      taskQueue: flowWorkflowTaskQueue(flow),
      workflowBundle: { code: bundle.code },
    });
    await worker.runUntil(until);
  } finally {
    await temporal.close();
  }
}
