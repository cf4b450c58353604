// How long a partition takes from its assignment to its first record folded, phase by phase: spawns
// `kafka-flow-temporal worker` on a fresh flow (fresh topic, group and workflows; a few records per
// partition) `--runs` times, one after the other, and reads each partition workflow's history.
// Times are ms after the worker's `partitions assigned` line:
//   start  WorkflowExecutionStarted (signalWithStart)
//   wft1   the first workflow task: scheduled → started (s2s) and started → completed (run)
//   rec    the recover activity: scheduled → started, started → completed
//   wft2   the workflow task after the recovery: its completion
//   fold   the first record folded (the flow's own stderr line)
// Needs the servers (infra up). `--partitions 3`, `--runs 5`, `--records 5` (per partition).
//
//   node bin/run-ts.js scripts/assign-latency.ts [--runs 5] [--partitions 3]
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { brokersFromEnv, readEnv } from '../config/env';
import { createKafkaClient, KafkaAdmin } from '../kafka';

const root = path.resolve(__dirname, '..');
const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const runs = arg('runs', 5);
const partitions = arg('partitions', 3);
const perPartition = arg('records', 5);

interface Phases {
  start: number;
  wft1s2s: number;
  wft1run: number;
  recSched: number;
  recS2s: number;
  recRun: number;
  wft2done: number;
  foldSched: number;
  fold: number;
  recoverMs?: number;
}

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  Number(t?.seconds ?? 0) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);

async function once(client: Client, admin: KafkaAdmin, kafka: ReturnType<typeof createKafkaClient>, i: number): Promise<Phases[]> {
  const id = `assign-latency-${process.pid}-${i}`;
  await admin.ensureTopics([{ topic: id, partitions }]);
  const producer = kafka.kafka.producer();
  await producer.connect();
  await producer.send({
    topic: id,
    messages: Array.from({ length: partitions * perPartition }, (_, n) => ({ partition: n % partitions, key: `k${n}`, value: JSON.stringify({ n }) })),
  });
  await producer.disconnect();
  const child = spawn(process.execPath, [path.join(root, 'bin/kafka-flow-temporal.js'), 'worker', path.join(root, 'scripts/assign-latency-flow.ts')], {
    env: { ...process.env, TEST_FLOW_NAME: id, TEST_FLOW_GROUP: id, TEST_FLOW_TOPIC: id, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let assignedAt = 0;
  const firstFold = new Map<number, number>();
  const recoverMs = new Map<number, number>();
  let buffered = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out:\n${buffered.slice(-3000)}`)), 90_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let j: Record<string, unknown>;
        try {
          j = JSON.parse(line);
        } catch {
          continue;
        }
        if (j.msg === 'partitions assigned' && assignedAt === 0) assignedAt = Number(j.time);
        if (j.msg === 'recovered') recoverMs.set(Number(j.partition), Number(j.ms));
        if (typeof j.firstFold === 'number') firstFold.set(Number(j.partition), j.firstFold);
        if (process.env.SHOW_LOG && j.msg) process.stdout.write(`${line.slice(0, 400)}\n`);
      }
      if (firstFold.size === partitions && assignedAt > 0) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`worker exited (${code}):\n${buffered.slice(-2000)}`)));
  });
  const out: Phases[] = [];
  for (let p = 0; p < partitions; p++) {
    const history = await client.workflow.getHandle(`kafka-flow/${id}/${id}/${p}`).fetchHistory();
    const events = history.events ?? [];
    const at = (e: (typeof events)[number]) => ms(e.eventTime as never) - assignedAt;
    const started = events.find((e) => e.workflowExecutionStartedEventAttributes);
    const wfts = events.filter((e) => e.workflowTaskScheduledEventAttributes);
    const wftStarted = events.filter((e) => e.workflowTaskStartedEventAttributes);
    const wftDone = events.filter((e) => e.workflowTaskCompletedEventAttributes);
    const actSched = events.filter((e) => e.activityTaskScheduledEventAttributes);
    const recover = actSched.find((e) => e.activityTaskScheduledEventAttributes!.activityType?.name === 'recover')!;
    const fold = actSched.find((e) => e.activityTaskScheduledEventAttributes!.activityType?.name === 'foldLoop')!;
    const recStarted = events.find((e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === Number(recover.eventId))!;
    const recDone = events.find((e) => Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === Number(recover.eventId))!;
    const wft2done = wftDone.find((e) => Number(e.eventId) > Number(recDone.eventId));
    if (process.env.SHOW_EVENTS) for (const e of events) process.stdout.write(`  p${p} ${String(at(e)).padStart(6)} ${e.eventType} ${e.activityTaskScheduledEventAttributes?.activityType?.name ?? ""}\n`);
    out.push({
      start: at(started!),
      wft1s2s: at(wftStarted[0]!) - at(wfts[0]!),
      wft1run: at(wftDone[0]!) - at(wftStarted[0]!),
      recSched: at(recover),
      recS2s: at(recStarted) - at(recover),
      recRun: at(recDone) - at(recStarted),
      wft2done: wft2done ? at(wft2done) : Number.NaN,
      foldSched: fold ? at(fold) : Number.NaN,
      fold: firstFold.get(p)! - assignedAt,
      recoverMs: recoverMs.get(p),
    });
  }
  child.kill('SIGTERM');
  await exited;
  await admin.deleteTopics([id]).catch(() => undefined);
  return out;
}

async function main(): Promise<void> {
  const env = readEnv();
  const connection = await Connection.connect({ address: `${env.temporalAddress.host}:${env.temporalAddress.port}` });
  const client = new Client({ connection });
  const kafka = createKafkaClient({ brokers: brokersFromEnv(), clientId: `assign-latency-${process.pid}`, logLevel: 'nothing' });
  const admin = new KafkaAdmin(kafka);
  await admin.connect();
  const all: Phases[] = [];
  const cols: Array<keyof Phases> = ['start', 'wft1s2s', 'wft1run', 'recSched', 'recS2s', 'recRun', 'wft2done', 'foldSched', 'fold'];
  process.stdout.write(`load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  process.stdout.write(`run p  ${cols.map((c) => c.padStart(9)).join('')}\n`);
  for (let i = 0; i < runs; i++) {
    const phases = await once(client, admin, kafka, i);
    phases.forEach((ph, p) => {
      process.stdout.write(`${String(i + 1).padStart(3)} ${p}  ${cols.map((c) => String(Math.round(ph[c] as number)).padStart(9)).join('')}\n`);
    });
    all.push(...phases);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  process.stdout.write(`median ${cols.map((c) => String(Math.round(median(all.map((a) => a[c] as number)))).padStart(9)).join('')}\n`);
  process.stdout.write(`load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  await admin.close();
  await connection.close();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
