/**
 * `npm start`: the servers, the example's topic, two worker processes and a producer of orders,
 * a link to the flow in the Temporal UI and a live one-line summary (with the outputs the flow emitted: alerts and sessions). Ctrl-C stops it all cleanly.
 * Options (env): SALES_RATE orders/s (500), SALES_WORKERS (2), SALES_DURATION seconds (until Ctrl-C).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { up } from '../../infra/infra';
import { readInfraSettings } from '../../infra/settings';
import { createKafkaClient, KafkaAdmin } from '../../kafka';
import { flowStatus } from '../../workers/cli/flow-status';
import flow, { alertsTopic, SESSION_GAP_MS, sessionsTopic, topic } from './flow';
import { order } from './orders';

const rate = Number(process.env.SALES_RATE ?? 500);
const workerCount = Number(process.env.SALES_WORKERS ?? 2);
const durationS = process.env.SALES_DURATION ? Number(process.env.SALES_DURATION) : undefined;
const PARTITIONS = 6;
const root = path.resolve(__dirname, '../..');

async function main(): Promise<void> {
  const settings = readInfraSettings();
  console.log('bringing up Kafka, Temporal and Cassandra (first run fetches them) ...');
  for (const r of await up(settings, (line) => console.log(`  ${line}`))) {
    console.log(`  ${r.name.padEnd(9)} ${r.address}${r.action === 'reused' ? ' (already running)' : ` (started in ${(r.ms / 1000).toFixed(1)} s)`}`);
  }
  const client = createKafkaClient({ brokers: settings.env.kafkaBrokers.map((b) => `${b.host}:${b.port}`), clientId: 'sales-example' });
  const admin = new KafkaAdmin(client);
  await admin.connect();
  await admin.ensureTopics([{ topic, partitions: PARTITIONS }]);
  await admin.close();

  const workers: ChildProcess[] = [];
  for (let i = 0; i < workerCount; i++) {
    const w = spawn(process.execPath, [path.join(root, 'bin/kafka-flow-temporal.js'), 'worker', path.join(__dirname, 'flow.ts')], {
      stdio: ['ignore', 'inherit', 'pipe'],
      // Quiet by default: a rebalance's expected activity failures (stale generations) are warnings of the SDK.
      env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', TEMPORAL_LOG_LEVEL: process.env.TEMPORAL_LOG_LEVEL ?? 'error' },
    });
    w.stderr?.on('data', (d: Buffer) => process.stderr.write(`[worker ${i + 1}] ${d}`));
    workers.push(w);
  }
  const ui = `http://${settings.temporal.host}:${settings.temporal.uiPort}/namespaces/${settings.temporal.namespace}/workflows?query=${encodeURIComponent(`KafkaFlow="${flow.name}"`)}`;
  console.log(`\nflow "${flow.name}": ${workerCount} workers, topic ${topic} (${PARTITIONS} partitions), ${rate} orders/s`);
  console.log(`Temporal UI: ${ui}`);
  console.log(`             (columns: add KafkaFlowPhase, KafkaGeneration, KafkaLag, KafkaKeys, KafkaOwner with the list's column settings)`);
  console.log(`alerts:      topic ${alertsTopic} (a store crossing another $10,000; exactly once for read_committed consumers)`);
  console.log(`sessions:    topic ${sessionsTopic} (a store's orders until it is quiet for ${SESSION_GAP_MS / 1000} s; Dublin orders in bursts)`);
  console.log(`state:       node bin/kafka-flow-temporal.js inspect examples/sales/flow.ts\n`);

  const producer = client.kafka.producer({ idempotent: true });
  await producer.connect();
  let produced = 0;
  let producedAtLastLine = 0;
  let stopping = false;
  const producing = (async () => {
    const started = Date.now();
    while (!stopping) {
      const due = Math.floor(((Date.now() - started) / 1000) * rate) - produced;
      if (due > 0) {
        const batch = Array.from({ length: Math.min(due, 5000) }, (_, j) => order(produced + j));
        await producer.send({ topic, messages: batch.map((o) => ({ key: o.store, value: JSON.stringify(o) })) });
        produced += batch.length;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();

  const summary = setInterval(async () => {
    const rows = await flowStatus(flow.name).catch(() => []);
    const perWorker = new Map<string, number>();
    for (const r of rows) if (r.phase === 'running' && r.owner) perWorker.set(r.owner.taskQueue, (perWorker.get(r.owner.taskQueue) ?? 0) + 1);
    const lag = rows.reduce((sum, r) => sum + (r.lag ?? 0), 0);
    const outputs = rows.reduce((sum, r) => sum + (r.counters.outputs ?? 0), 0);
    const perS = Math.round((produced - producedAtLastLine) / 2);
    producedAtLastLine = produced;
    const split = [...perWorker.values()].join('+') || '0';
    process.stdout.write(`${new Date().toISOString().slice(11, 19)}  produced ${produced} (${perS}/s)  partitions running ${split}  lag ${lag}  outputs ${outputs}\n`);
  }, 2000);

  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${why}: stopping the producer and the workers (they flush, commit and leave the group) ...`);
    clearInterval(summary);
    await producing.catch(() => undefined);
    await producer.disconnect();
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.exitCode !== null) return resolve();
            w.once('exit', () => resolve());
            w.kill('SIGTERM');
          }),
      ),
    );
    console.log(`produced ${produced} orders; workers exited with ${workers.map((w) => w.exitCode).join(', ')}`);
    process.exit(workers.every((w) => w.exitCode === 0) ? 0 : 1);
  };
  process.once('SIGINT', () => void stop('Ctrl-C'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  if (durationS !== undefined) setTimeout(() => void stop(`${durationS} s elapsed`), durationS * 1000);
  for (const w of workers) w.once('exit', (code) => !stopping && void stop(`a worker exited (${code})`));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
