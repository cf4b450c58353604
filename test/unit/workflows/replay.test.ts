import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';

// Histories recorded from real runs (scripts/record-histories.ts: first assignment, recovery,
// persists, continue-as-new, a second worker joining, the first leaving) replayed against the
// current workflow code. A change that breaks determinism fails here — re-record only when the
// change is deliberate and deployed with a new task queue or patched() (see README).
const dir = path.join(__dirname, '../../histories');
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();

test('there are recorded histories to replay, covering the lifecycle', () => {
  expect(files.length).toBeGreaterThanOrEqual(4);
  const all = files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');
  for (const activity of ['recover', 'foldLoop', 'persist']) expect(all).toContain(`"${activity}"`);
  expect(all).toContain('EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW');
  expect(all).toContain('"revoked"');
  expect(all).toContain('"assigned"');
});

test('every recorded partition-workflow history replays deterministically', async () => {
  const histories = files.map((f) => ({
    workflowId: f.replace(/\.json$/, ''),
    history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))),
  }));
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowsPath: require.resolve('../../../workflows') }, histories)) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
  expect(replayed).toBe(files.length);
}, 60_000);

// Tracing turned on for a running fleet: the histories recorded without Temporal's OpenTelemetry
// workflow interceptors replay with them bundled (as a worker with OTEL_* set runs), and the
// replay exports no span (the sink is not called while replaying).
test('every recorded history replays with the tracing interceptors bundled', async () => {
  const { InMemorySpanExporter, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
  const { Resource } = await import('@opentelemetry/resources');
  const { makeWorkflowExporter } = await import('@temporalio/interceptors-opentelemetry');
  const exporter = new InMemorySpanExporter();
  const histories = files.map((f) => ({
    workflowId: f.replace(/\.json$/, ''),
    history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))),
  }));
  const failures: string[] = [];
  let replayed = 0;
  const options = {
    workflowsPath: require.resolve('../../../workflows'),
    interceptors: { workflowModules: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')] },
    sinks: { exporter: makeWorkflowExporter(new SimpleSpanProcessor(exporter), new Resource({ 'service.name': 'replay' })) },
  };
  for await (const result of Worker.runReplayHistories(options, histories)) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
  expect(replayed).toBe(files.length);
  expect(exporter.getFinishedSpans()).toEqual([]);
}, 60_000);
