/**
 * The experiment behind workers/runtime/quiet-shutdown.ts: how many workflow tasks a Temporal
 * workflow worker loses when it is shut down while tasks reach it. Beside a steady worker, `--stops`
 * workers are started and shut down one after the other while waves of signals (one per workflow,
 * 300 ms apart) keep 40 workflows busy; each is shut down at once (`--quiet-ms 0`) or after the
 * quiet wait (default 150 ms). A lost task stays started on the server, unanswered, until its 10 s
 * start-to-close timeout; the script counts the timeouts and the tasks still started after 4 s.
 *
 *   node bin/run-ts.js scripts/shutdown-task-loss.ts [--stops 10] [--quiet-ms 150]   (TEMPORAL_ADDRESS)
 *
 * Results (docs/experiments/2026-12-06-shutdown-task-loss.md): 1–4 tasks lost per 10 stops
 * without the wait, 0–1 with it. The wait narrows the window; it does not close it.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { formatHostPort, readEnv } from '../config/env';
import { QUIET_SHUTDOWN, untilWorkflowWorkerQuiet } from '../workers/runtime/quiet-shutdown';

const { values } = parseArgs({ options: { stops: { type: 'string', default: '10' }, 'quiet-ms': { type: 'string', default: String(QUIET_SHUTDOWN.quietMs) } } });
const STOPS = Number(values.stops);
const QUIET_MS = Number(values['quiet-ms']);
const WORKFLOWS = 40;
const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

async function main(): Promise<void> {
  const env = readEnv(process.env);
  const address = formatHostPort(env.temporalAddress);
  const namespace = env.temporalNamespace;
  const taskQueue = `shutdown-task-loss-${randomUUID().slice(0, 8)}`;
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace });
  const workflowBundle = await bundleWorkflowCode({ workflowsPath: require.resolve('./shutdown-task-loss/workflows'), logger: silent });
  const natives: NativeConnection[] = [];
  const worker = async () => {
    const native = await NativeConnection.connect({ address });
    natives.push(native);
    return Worker.create({ connection: native, namespace, taskQueue, workflowBundle, stickyQueueScheduleToStartTimeout: '2 seconds' });
  };
  const ids = Array.from({ length: WORKFLOWS }, (_, i) => `${taskQueue}-${i}`);
  const steady = await worker();
  const steadyRun = steady.run();
  for (const workflowId of ids) await client.workflow.start('signalSink', { taskQueue, workflowId });
  let pumping = true;
  const pump = (async () => {
    while (pumping) {
      await Promise.all(ids.map((id) => client.workflow.getHandle(id).signal('poke')));
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  for (let i = 0; i < STOPS; i++) {
    const stopping = await worker();
    const run = stopping.run();
    await new Promise((r) => setTimeout(r, 1_200));
    if (QUIET_MS > 0) await untilWorkflowWorkerQuiet(stopping, { ...QUIET_SHUTDOWN, quietMs: QUIET_MS });
    stopping.shutdown();
    await run;
  }
  pumping = false;
  await pump;
  await new Promise((r) => setTimeout(r, 4_500));
  let timedOut = 0;
  let unanswered = 0;
  for await (const wf of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` })) {
    const handle = client.workflow.getHandle(wf.workflowId, wf.runId);
    for (const e of (await handle.fetchHistory()).events ?? []) if (e.workflowTaskTimedOutEventAttributes?.timeoutType === 1) timedOut++;
    if (wf.status.name !== 'RUNNING') continue;
    const started = (await handle.describe()).raw.pendingWorkflowTask?.startedTime;
    if (started && Date.now() - tsToMs(started) > 4_000) unanswered++;
  }
  process.stdout.write(`${STOPS} stops, quiet wait ${QUIET_MS} ms: ${timedOut + unanswered} workflow task(s) lost (${timedOut} timed out, ${unanswered} still started)\n`);
  steady.shutdown();
  await steadyRun;
  await Promise.all(ids.map((id) => client.workflow.getHandle(id).terminate().catch(() => undefined)));
  for (const native of natives) await native.close();
  await connection.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
