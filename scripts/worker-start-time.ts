// How long a worker process takes to start and to stop: spawns `kafka-flow-temporal worker` on the
// offset-hash fixture flow (a fresh 3-partition topic with a few records) `--runs` times, one after
// the other, and prints per run the wall time from spawn to its `worker started` line, the process's
// CPU time by then (user + system, from /proc: steadier than wall time on a shared machine), and the
// time from SIGTERM to exit. The environment is passed through (e.g. KFT_WORKFLOW_BUNDLE_DIR=off to
// bundle the workflows at every start, as before the bundle cache). Needs the servers (infra up).
//
//   node bin/run-ts.js scripts/worker-start-time.ts [--runs 5]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createKafkaClient, KafkaAdmin } from '../kafka';
import { brokersFromEnv } from '../config/env';

const root = path.resolve(__dirname, '..');
const runs = Number(process.argv[process.argv.indexOf('--runs') + 1] || 5) || 5;
const TICKS = 100; // USER_HZ on Linux

function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS; // utime, stime
  } catch {
    return undefined;
  }
}

async function once(names: Record<string, string>): Promise<{ startMs: number; startCpuS: number; stopMs: number; exit: number | null }> {
  const started = performance.now();
  const child = spawn(process.execPath, [path.join(root, 'bin/kafka-flow-temporal.js'), 'worker', path.join(root, 'test/fixtures/offset-hash-flow.ts')], {
    env: { ...process.env, ...names, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let startMs = 0;
  let startCpuS = 0;
  await new Promise<void>((resolve, reject) => {
    let buffered = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      if (startMs === 0 && buffered.includes('"msg":"worker started"')) {
        startMs = performance.now() - started;
        startCpuS = cpuSeconds(child.pid!) ?? Number.NaN;
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`worker exited (${code}) before starting:\n${buffered.slice(-2000)}`)));
  });
  const stopping = performance.now();
  child.kill('SIGTERM');
  const exit = await exited;
  return { startMs, startCpuS, stopMs: performance.now() - stopping, exit };
}

async function main(): Promise<void> {
  const id = `start-time-${process.pid}`;
  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: id, logLevel: 'nothing' });
  const admin = new KafkaAdmin(client);
  await admin.connect();
  await admin.ensureTopics([{ topic: id, partitions: 3 }]);
  const producer = client.kafka.producer();
  await producer.connect();
  await producer.send({ topic: id, messages: Array.from({ length: 30 }, (_, n) => ({ key: `k${n % 5}`, value: JSON.stringify({ n }) })) });
  await producer.disconnect();
  const names = { TEST_FLOW_NAME: id, TEST_FLOW_GROUP: id, TEST_FLOW_TOPIC: id, TEST_PERSIST_EVERY_MS: '1000', TEST_SESSION_TIMEOUT_MS: '6000' };
  const results = [];
  for (let i = 0; i < runs; i++) {
    const r = await once(names);
    results.push(r);
    process.stdout.write(`run ${i + 1}: start ${(r.startMs / 1000).toFixed(2)} s (CPU ${r.startCpuS.toFixed(2)} s), stop ${(r.stopMs / 1000).toFixed(2)} s, exit ${r.exit}\n`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  process.stdout.write(
    `median of ${runs}: start ${(median(results.map((r) => r.startMs)) / 1000).toFixed(2)} s, CPU ${median(results.map((r) => r.startCpuS)).toFixed(2)} s, stop ${(median(results.map((r) => r.stopMs)) / 1000).toFixed(2)} s (KFT_WORKFLOW_BUNDLE_DIR=${process.env.KFT_WORKFLOW_BUNDLE_DIR ?? 'unset'})\n`,
  );
  await admin.deleteTopics([id]).catch(() => undefined);
  await admin.close();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
