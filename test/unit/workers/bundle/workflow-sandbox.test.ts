// The workflow worker's sandbox options reach the worker as the SDK compiles its options: the
// activation time bound is not in the SDK's public types, so an SDK upgrade that stopped passing
// it through would silently bring back the 5 s default (and the abort of a process paused
// mid-activation, workers/bundle/workflow-sandbox.ts).
import { DefaultLogger } from '@temporalio/worker';
import { workflowSandboxOptions } from '../../../../workers/bundle/workflow-sandbox';

test('the activation time bound reaches the compiled worker options: 2 minutes, not the 5 s default', () => {
  // biome-ignore lint/suspicious/noExplicitAny: the SDK's internal options compiler, untyped on purpose
  const internal = require('@temporalio/worker/lib/worker-options') as any;
  // biome-ignore lint/suspicious/noExplicitAny: idem
  const metrics = (require('@temporalio/common/lib/metrics') as any).noopMetricMeter;
  const compile = (extra: Record<string, unknown>) =>
    internal.compileWorkerOptions({ taskQueue: 't', workflowBundle: { code: '' }, ...extra }, new DefaultLogger('ERROR'), metrics);
  expect(compile({}).isolateExecutionTimeoutMs).toBe(5_000);
  expect(compile(workflowSandboxOptions).isolateExecutionTimeoutMs).toBe(120_000);
});
