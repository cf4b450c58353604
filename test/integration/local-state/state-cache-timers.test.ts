// Key timers with the bounded state cache on real workers, real Kafka and Temporal: event-time
// session timers (onTimer emits each session's summary) and an event-time stateTtl on 200 keys
// (test/fixtures/session-ttl-flow.ts), a worker holding at most 20 of them in memory — the others'
// timers live in its local store's due-time index and fire when the partition's records pass them,
// the key read back for it. The worker is killed -9 with fires in memory not persisted; the next one,
// on the same state directory, loads no key, and the timers (still in the store and its index) fire
// again, once in effect. The output topic (read_committed) holds every summary a reference model
// gives, each once; the persisted states are the model's (expired keys gone). And processing-time
// timers (test/fixtures/reminder-flow.ts, 8 s after each record) on 200 keys with a bound of 20,
// through a kill -9: every fire in a key's persisted state has its one reminder, and none other.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PartitionReader } from '../../../kafka';
import { SESSION_GAP_MS } from '../../fixtures/session-window-flow';
import { type KeptSession, type SessionSummary, STATE_TTL_MS, sessionTtlFlow } from '../../fixtures/session-ttl-flow';
import { inspectFlow } from '../../../workers/cli/inspect';
import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
import { eventually } from '../../support/eventually';
import { expectOneReminderPerFire, firedAtLeast, readReminders } from '../../support/reminders';
import { send, startCli, testClient, topicWith, unique } from '../../support/servers';

const flowModule = path.join(__dirname, '../../fixtures/session-ttl-flow.ts');
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const KEYS = 200;
const MAX_KEYS = 20;
const TICKS = 600;

interface Order {
  key: string;
  partition: number;
  ts: number;
}

/**
 * Orders a second apart in record time: key k orders in bursts of 20 s every 60, 120 or 180 s (by
 * k % 3), so its sessions close (quiet for more than SESSION_GAP_MS) and two keys in three expire
 * between bursts (quiet for more than STATE_TTL_MS) and come back.
 */
function orders(): Order[] {
  const out: Order[] = [];
  let seed = 20261206;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let tick = 0; tick < TICKS; tick++) {
    for (let k = 0; k < KEYS; k++) {
      const r = next();
      const period = 60 * (1 + (k % 3));
      if ((tick + k * 7) % period < 20 && r < 0.3) out.push({ key: `k${k}`, partition: k % 2, ts: T0 + tick * 1000 });
    }
  }
  return out;
}

/** The reference: each partition's records in order, the timers they pass firing first (close, then expiry). */
function model(input: readonly Order[]): { summaries: SessionSummary[]; states: Map<string, KeptSession> } {
  const summaries: SessionSummary[] = [];
  const states = new Map<string, KeptSession>();
  for (const partition of [0, 1]) {
    const keys = new Map<string, KeptSession>();
    const passTo = (watermark: number) => {
      for (const [key, s] of keys) {
        if (s.orders > 0 && s.last + SESSION_GAP_MS <= watermark) {
          summaries.push({ key, orders: s.orders, first: s.first, last: s.last });
          keys.set(key, { ...s, orders: 0, sessions: s.sessions + 1 });
        }
        if (s.last + STATE_TTL_MS <= watermark) keys.delete(key);
      }
    };
    let watermark = Number.NEGATIVE_INFINITY;
    for (const o of input.filter((x) => x.partition === partition)) {
      watermark = Math.max(watermark, o.ts);
      passTo(watermark);
      const s = keys.get(o.key);
      const open = s !== undefined && s.orders > 0;
      keys.set(o.key, { orders: (s?.orders ?? 0) + 1, first: open ? s.first : o.ts, last: o.ts, sessions: s?.sessions ?? 0 });
    }
    for (const [key, s] of keys) states.set(key, s);
  }
  return { summaries, states };
}

const asMessages = (input: readonly Order[]) => input.map((o) => ({ key: o.key, partition: o.partition, value: JSON.stringify({ n: 1 }), timestamp: String(o.ts) }));

test('timers of keys out of memory fire from the store\'s due-time index, through a kill -9 and a restart loading no key: every summary once, states exact', async () => {
  const names = { TEST_FLOW_NAME: unique('cache-timers'), TEST_FLOW_GROUP: unique('cache-timers-group'), TEST_FLOW_TOPIC: unique('cache-timers-in'), TEST_OUTPUT_TOPIC: unique('cache-timers-out') };
  const input = orders();
  const chunks = Array.from({ length: 6 }, (_, c) => input.filter((o) => o.ts >= T0 + (c * TICKS * 1000) / 6 && o.ts < T0 + ((c + 1) * TICKS * 1000) / 6));
  const expected = model(input);
  expect(expected.summaries.length).toBeGreaterThan(500);
  expect(expected.states.size).toBeLessThan(KEYS); // some keys expired
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cache-timers-'));
  await topicWith(names.TEST_FLOW_TOPIC, 2, asMessages(chunks[0]!), { 'retention.ms': '-1' });
  const client = await testClient('cache-timers-test');
  const admin = client.kafka.admin();
  await admin.connect();
  const caughtUp = async () => {
    const [committed] = await admin.fetchOffsets({ groupId: names.TEST_FLOW_GROUP, topics: [names.TEST_FLOW_TOPIC] });
    const ends = await admin.fetchTopicOffsets(names.TEST_FLOW_TOPIC);
    return ends.every((e) => committed?.partitions.find((c) => c.partition === e.partition)?.offset === e.high) || undefined;
  };
  // Persists every 3 s, no idle flush: at the kill, fires are in memory and not persisted.
  const env = { ...names, KFT_EXIT_WITH_PARENT: '0', TEST_PERSIST_EVERY_MS: '3000', TEST_IDLE_FLUSH: 'off', KFT_STATE_DIR: dir, KFT_STATE_CACHE_MAX_KEYS: String(MAX_KEYS) };
  const workers: ReturnType<typeof startCli>[] = [];
  const start = (extra: NodeJS.ProcessEnv = {}) => {
    const w = startCli(['worker', flowModule], { ...env, ...extra });
    workers.push(w);
    return w;
  };
  const lastLines = () => workers.map((w, i) => `worker ${i}:\n${w.output().split('\n').slice(-8).join('\n')}`).join('\n');
  const reader = new PartitionReader(client);
  try {
    const portA = await freePort();
    const a = start({ KFT_METRICS_PORT: String(portA) });
    await eventually('the first worker caught up with the first chunk', caughtUp, 120_000, lastLines);
    await send(client, names.TEST_FLOW_TOPIC, asMessages(chunks[1]!));
    await eventually('the first worker caught up with the second chunk', caughtUp, 120_000, lastLines);
    await eventually('keys read back for their timers', async () => ((await workerMetric(portA, 'kafka_flow_keys_read_for_timers_total')) > 0 ? true : undefined), 30_000, lastLines);
    const live = await workerMetric(portA, 'kafka_flow_keys_live');
    process.stderr.write(`state-cache-timers: ${live} live keys of ${KEYS} (bound ${MAX_KEYS}), ${await workerMetric(portA, 'kafka_flow_keys_read_for_timers_total')} read back for timers\n`);
    // The third chunk: folded, sessions closed, not persisted — then kill -9.
    await send(client, names.TEST_FLOW_TOPIC, asMessages(chunks[2]!));
    await new Promise((r) => setTimeout(r, 1_500));
    a.child.kill('SIGKILL');
    await a.stop();

    const portB = await freePort();
    const b = start({ KFT_METRICS_PORT: String(portB) });
    for (const chunk of chunks.slice(3)) {
      await send(client, names.TEST_FLOW_TOPIC, asMessages(chunk));
      await eventually('the restarted worker caught up', caughtUp, 180_000, lastLines);
    }
    // Everything persisted (the last fires landed with their keys' writes, or the commit would lag).
    await new Promise((r) => setTimeout(r, 4_000));
    const readBack = await workerMetric(portB, 'kafka_flow_keys_read_for_timers_total');
    process.stderr.write(`state-cache-timers: after the restart ${readBack} keys read back for timers\n`);
    expect(readBack).toBeGreaterThan(0);
    const recovered = b
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"partition recovered"'))
      .map((l) => (JSON.parse(l) as { keys: number }).keys);
    expect(recovered).toEqual([0, 0]);
    expect(await b.stop()).toBe(0);

    const summaries: SessionSummary[] = [];
    await reader.readTopic(names.TEST_OUTPUT_TOPIC, 2, (r) => summaries.push(JSON.parse(String(r.value)) as SessionSummary));
    const byKey = (x: SessionSummary, y: SessionSummary) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.first - y.first);
    expect(summaries.length).toBe(expected.summaries.length);
    expect(summaries.sort(byKey)).toEqual([...expected.summaries].sort(byKey));

    const definition = sessionTtlFlow({ name: names.TEST_FLOW_NAME, group: names.TEST_FLOW_GROUP, topic: names.TEST_FLOW_TOPIC, output: names.TEST_OUTPUT_TOPIC });
    const states = new Map<string, KeptSession>();
    for await (const k of inspectFlow(definition as never)) if (k.state !== undefined && k.state !== null) states.set(k.key, k.state as KeptSession);
    expect(new Map([...states].sort())).toEqual(new Map([...expected.states].sort()));
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.stop()));
    await reader.close();
    await admin.disconnect();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600_000);

test('processing-time timers of keys out of memory fire on the tick, through a kill -9 and a restart loading no key: each fire\'s reminder once', async () => {
  const reminders = path.join(__dirname, '../../fixtures/reminder-flow.ts');
  const names = { TEST_FLOW_NAME: unique('cache-reminders'), TEST_FLOW_GROUP: unique('cache-reminders-group'), TEST_FLOW_TOPIC: unique('cache-reminders-in'), TEST_OUTPUT_TOPIC: unique('cache-reminders-out') };
  const keys = Array.from({ length: KEYS }, (_, i) => `r${i}`);
  const wave = (n: number) => keys.map((key, i) => ({ key, partition: i % 2, value: JSON.stringify({ n }) }));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cache-reminders-'));
  await topicWith(names.TEST_FLOW_TOPIC, 2, wave(0));
  const client = await testClient('cache-reminders-test');
  const env = { ...names, KFT_EXIT_WITH_PARENT: '0', TEST_PERSIST_EVERY_MS: '1000', TEST_REMIND_AFTER_MS: '8000', KFT_STATE_DIR: dir, KFT_STATE_CACHE_MAX_KEYS: String(MAX_KEYS) };
  const workers: ReturnType<typeof startCli>[] = [];
  const reader = new PartitionReader(client);
  const outputs = () => readReminders(reader, names.TEST_OUTPUT_TOPIC);
  try {
    const portA = await freePort();
    const a = startCli(['worker', reminders], { ...env, KFT_METRICS_PORT: String(portA) });
    workers.push(a);
    // The first reminders fire 8 s after their records: by then most keys are written and out of memory.
    await eventually('the first reminders landed', async () => firedAtLeast(await outputs(), keys, 1) || undefined, 120_000, () => a.output().slice(-2000));
    expect(await workerMetric(portA, 'kafka_flow_keys_read_for_timers_total')).toBeGreaterThan(0);
    // The second wave re-arms every key; killed -9 before those timers are due (they are in the store).
    await send(client, names.TEST_FLOW_TOPIC, wave(1));
    await new Promise((r) => setTimeout(r, 4_000));
    a.child.kill('SIGKILL');
    await a.stop();
    const portB = await freePort();
    const b = startCli(['worker', reminders], { ...env, KFT_METRICS_PORT: String(portB) });
    workers.push(b);
    await eventually('every key fired again on the restarted worker', async () => firedAtLeast(await outputs(), keys, 2) || undefined, 120_000, () => b.output().slice(-2000));
    const readBack = await workerMetric(portB, 'kafka_flow_keys_read_for_timers_total');
    process.stderr.write(`state-cache-timers (processing): after the restart ${readBack} keys read back for their timers\n`);
    expect(readBack).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await b.stop()).toBe(0);
    const recovered = b
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"partition recovered"'))
      .map((l) => (JSON.parse(l) as { keys: number }).keys);
    // Each of its recoveries loads no key: both partitions, and once more any partition the group
    // moved again on a loaded machine (the killed worker's member leaving after its session).
    expect(recovered.length).toBeGreaterThanOrEqual(2);
    expect(recovered.filter((k) => k !== 0)).toEqual([]);
    await expectOneReminderPerFire(names, await outputs(), keys, 2);
  } finally {
    for (const key of Object.keys(names)) delete process.env[key];
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.stop()));
    await reader.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600_000);
