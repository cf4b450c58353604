/**
 * Records real partition-workflow histories for the replay tests (test/histories/*.json): a real
 * run of the worker against the real servers — first assignment, recovery, persists, continue-as-
 * new, a second worker joining (rebalance), the first one leaving (revoke). Re-run after a
 * workflow change (added next to the earlier recordings):  node bin/run-ts.js scripts/record-histories.ts
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { formatHostPort, readEnv } from '../config/env';
import { createKafkaClient, KafkaAdmin } from '../kafka';
import { flowStatus } from '../workers/cli/flow-status';
import { connectTemporal } from '../workers/connect/temporal-connection';

const root = path.resolve(__dirname, '..');
const out = path.join(root, 'test/histories');
const id = randomUUID().slice(0, 6);
const env = {
  TEST_FLOW_NAME: `replay-${id}`,
  TEST_FLOW_GROUP: `replay-${id}`,
  TEST_FLOW_TOPIC: `replay-${id}`,
  TEST_FLOW_BACKEND: process.env.TEST_FLOW_BACKEND ?? 'kafka',
  TEST_PERSIST_EVERY_MS: '500',
  KFT_MAX_HISTORY_EVENTS: '80',
  LOG_LEVEL: 'warn',
};
const PARTITIONS = 2;

const startWorker = (name: string): ChildProcess => {
  const w = spawn(process.execPath, [path.join(root, 'bin/kafka-flow-temporal.js'), 'worker', path.join(root, 'test/fixtures/offset-hash-flow.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  w.on('exit', (code) => console.log(`worker ${name} exited ${code}`));
  return w;
};
const stopWorker = (w: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (w.exitCode !== null) return resolve();
    w.once('exit', () => resolve());
    w.kill('SIGTERM');
  });

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out: ${what}`);
}

async function main(): Promise<void> {
  const e = readEnv();
  const client = createKafkaClient({ brokers: e.kafkaBrokers.map(formatHostPort), clientId: 'record-histories' });
  const admin = new KafkaAdmin(client);
  await admin.connect();
  await admin.ensureTopics([{ topic: env.TEST_FLOW_TOPIC, partitions: PARTITIONS }]);
  const producer = client.kafka.producer();
  await producer.connect();
  const produce = (from: number, n: number) =>
    producer.send({
      topic: env.TEST_FLOW_TOPIC,
      messages: Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 7}`, value: JSON.stringify({ n: from + i }) })),
    });

  const running = async (owners: number) => {
    const rows = await flowStatus(env.TEST_FLOW_NAME);
    return rows.length === PARTITIONS && rows.every((r) => r.phase === 'running') && new Set(rows.map((r) => r.owner?.taskQueue)).size === owners;
  };
  await produce(0, 200);
  const a = startWorker('A');
  await until('A runs both partitions', () => running(1));
  await until('A continued as new', async () => (await flowStatus(env.TEST_FLOW_NAME)).every((r) => r.counters.runs >= 2), 90_000);
  await produce(200, 200);
  const b = startWorker('B');
  await until('A and B share the partitions', () => running(2), 90_000);
  await produce(400, 200);
  await stopWorker(a);
  await until('B runs both partitions', () => running(1), 90_000);
  await new Promise((r) => setTimeout(r, 2000));
  await stopWorker(b);

  const temporal = await connectTemporal(e);
  fs.mkdirSync(out, { recursive: true });
  // Earlier recordings stay: they replay the branches of runs started before each patched()
  // change, which running workflows may still take. Remove one only with its patch's deprecation.
  let n = 0;
  for await (const wf of temporal.client.workflow.list({ query: `KafkaFlow = "${env.TEST_FLOW_NAME}"` })) {
    const history = await temporal.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    const file = path.join(out, `partition-${wf.workflowId.split('/').pop()}-run-${wf.runId.slice(0, 8)}.json`);
    fs.writeFileSync(file, historyToJSON(history));
    console.log(`recorded ${path.relative(root, file)} (${history.events?.length} events, ${wf.status.name})`);
    n++;
  }
  for await (const wf of temporal.client.workflow.list({ query: `KafkaFlow = "${env.TEST_FLOW_NAME}" AND ExecutionStatus = "Running"` })) {
    await temporal.client.workflow.getHandle(wf.workflowId).terminate('recorded');
  }
  await temporal.close();
  await producer.disconnect();
  await admin.deleteTopics([env.TEST_FLOW_TOPIC]).catch(() => undefined);
  await admin.close();
  console.log(`${n} histories in ${path.relative(root, out)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
