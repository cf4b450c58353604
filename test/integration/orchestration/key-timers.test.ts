// Per-key timers on the real servers: session windows by event time (test/fixtures/session-window-flow.ts)
// through a kill -9. A worker folds the first third of the input, then is killed once it has folded
// the second — with sessions closed (timers fired, summaries emitted) that it had not persisted yet
// (it persists every 5 s); a second worker takes over after the session timeout, replays them from
// the committed offset, and folds the last third, where the sessions it recovered open close by the
// timers persisted with them. The output topic, read read_committed, holds every session summary a
// reference model gives, each exactly once (transactional Kafka: a fire's summary lands with the
// key's snapshot and the offset, or not at all).
import path from 'node:path';
import { PartitionReader } from '../../../kafka';
import { SESSION_GAP_MS, type SessionSummary } from '../../fixtures/session-window-flow';
import { expectOneReminderPerFire, firedAtLeast, readReminders } from '../../support/reminders';
import { eventually } from '../../support/eventually';
import { send, startCli, testClient, topicWith, unique } from '../../support/servers';

const flowModule = path.join(__dirname, '../../fixtures/session-window-flow.ts');
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

interface Order {
  key: string;
  partition: number;
  ts: number;
}

/**
 * Orders on two partitions, a second apart in record time: each key orders in bursts of 20 s and
 * is then quiet for 40 s, so its sessions close about once a minute and at any moment most keys
 * have a session waiting to close (a pending timer).
 */
function orders(fromTick: number, toTick: number): Order[] {
  const out: Order[] = [];
  let seed = 20261205;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let tick = 0; tick < toTick; tick++) {
    for (let k = 0; k < 10; k++) {
      const r = next();
      const active = (tick + k * 7) % 60 < 20;
      if (tick >= fromTick && active && r < 0.5) out.push({ key: `k${k}`, partition: k % 2, ts: T0 + tick * 1000 });
    }
  }
  return out;
}

/** The reference: per partition, in order, the sessions each order's timestamp closes first. */
function model(input: readonly Order[]): SessionSummary[] {
  const out: SessionSummary[] = [];
  for (const partition of [0, 1]) {
    const open = new Map<string, { orders: number; first: number; last: number }>();
    for (const o of input.filter((x) => x.partition === partition)) {
      const due = [...open].filter(([, s]) => s.last + SESSION_GAP_MS <= o.ts).sort((a, b) => a[1].last - b[1].last || (a[0] < b[0] ? -1 : 1));
      for (const [key, s] of due) {
        out.push({ key, ...s });
        open.delete(key);
      }
      const s = open.get(o.key);
      open.set(o.key, { orders: (s?.orders ?? 0) + 1, first: s?.first ?? o.ts, last: o.ts });
    }
  }
  return out;
}

const asMessages = (input: readonly Order[]) => input.map((o) => ({ key: o.key, partition: o.partition, value: JSON.stringify({ n: 1 }), timestamp: String(o.ts) }));

type Worker = ReturnType<typeof startCli>;

/**
 * The first worker folds the first third and catches up; the second third is sent and, once the
 * first worker has folded it (sessions closed, not persisted: it persists every 5 s, no idle flush),
 * `disturb` does its worst and returns the worker that goes on; the last third is sent; once the
 * group caught up, the output topic (read_committed) must hold every session summary of the model,
 * each once.
 */
async function sessionsThrough(disturb: (first: Worker, start: () => Worker) => Promise<Worker[]>): Promise<void> {
  const names = { TEST_FLOW_NAME: unique('sessions'), TEST_FLOW_GROUP: unique('sessions-group'), TEST_FLOW_TOPIC: unique('sessions-in'), TEST_OUTPUT_TOPIC: unique('sessions-out') };
  const first = orders(0, 300);
  const second = orders(300, 600);
  const third = orders(600, 900);
  const expected = model([...first, ...second, ...third]);
  expect(expected.length).toBeGreaterThan(100);
  // The orders' timestamps are of 2026-01-01: the topic keeps them (retention.ms -1), or the broker's
  // time-based retention (7 days, checked every 5 minutes) deletes them as soon as it runs.
  await topicWith(names.TEST_FLOW_TOPIC, 2, asMessages(first), { 'retention.ms': '-1' });
  const client = await testClient('sessions-test');
  const admin = client.kafka.admin();
  await admin.connect();
  const caughtUp = async () => {
    const [committed] = await admin.fetchOffsets({ groupId: names.TEST_FLOW_GROUP, topics: [names.TEST_FLOW_TOPIC] });
    const ends = await admin.fetchTopicOffsets(names.TEST_FLOW_TOPIC);
    return ends.every((e) => committed?.partitions.find((c) => c.partition === e.partition)?.offset === e.high) || undefined;
  };
  const env = { ...names, KFT_EXIT_WITH_PARENT: '0', TEST_PERSIST_EVERY_MS: '5000', TEST_IDLE_FLUSH: 'off' };
  const workers: Worker[] = [];
  const start = () => {
    const w = startCli(['worker', flowModule], env);
    workers.push(w);
    return w;
  };
  const lastLines = () => workers.map((w, i) => `worker ${i}:\n${w.output().split('\n').slice(-8).join('\n')}`).join('\n');
  try {
    const a = start();
    await eventually('the first worker caught up with the first third', caughtUp, 90_000, lastLines);
    await send(client, names.TEST_FLOW_TOPIC, asMessages(second));
    await new Promise((r) => setTimeout(r, 1500)); // folded, sessions closed, not persisted
    const going = await disturb(a, start);
    // Sessions recovered open close in the last third only by the timers persisted with them.
    await send(client, names.TEST_FLOW_TOPIC, asMessages(third));
    await eventually('the group caught up', caughtUp, 120_000, lastLines);
    for (const w of going) expect(await w.stop()).toBe(0);

    const summaries: SessionSummary[] = [];
    const reader = new PartitionReader(client);
    try {
      await reader.readTopic(names.TEST_OUTPUT_TOPIC, 2, (r) => summaries.push(JSON.parse(String(r.value)) as SessionSummary));
    } finally {
      await reader.close();
    }
    const byKey = (x: SessionSummary, y: SessionSummary) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.first - y.first);
    try {
      expect(summaries.sort(byKey)).toEqual([...expected].sort(byKey));
    } catch (err) {
      // What each worker did with the partitions (assignments, recoveries, kept state, warnings): the diff alone does not say.
      const story = workers.map((w, i) => `worker ${i}:\n${w.output().split('\n').filter((l) => /assigned|recovered|kept in-memory|revoke|"level":[45]0/.test(l)).slice(-60).join('\n')}`).join('\n');
      throw new Error(`${(err as Error).message}\n\n${story}`);
    }
  } finally {
    for (const w of workers) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
    }
    await Promise.all(workers.map((w) => w.stop()));
    await admin.disconnect();
  }
}

test('session windows by event time through a kill -9: every session summary exactly once', async () => {
  await sessionsThrough(async (a, start) => {
    a.child.kill('SIGKILL');
    return [start()];
  });
}, 300_000);

test('session windows through a stale owner: frozen past its session timeout with sessions closed unpersisted, then woken, it lands none of them', async () => {
  await sessionsThrough(async (a, start) => {
    a.child.kill('SIGSTOP');
    const b = start();
    // b owns both partitions once a's session (6 s) has timed out; a wakes after its persist cadence (5 s) passed.
    await new Promise((r) => setTimeout(r, 12_000));
    a.child.kill('SIGCONT');
    return [b];
  });
}, 300_000);

test('session windows through a rebalance: a second worker joins while sessions close', async () => {
  await sessionsThrough(async (a, start) => [a, start()]);
}, 300_000);

test('processing-time timers through a kill -9: every fire in a key\'s persisted state has its one output, and none other', async () => {
  const reminders = path.join(__dirname, '../../fixtures/reminder-flow.ts');
  const names = { TEST_FLOW_NAME: unique('reminders'), TEST_FLOW_GROUP: unique('reminders-group'), TEST_FLOW_TOPIC: unique('reminders-in'), TEST_OUTPUT_TOPIC: unique('reminders-out') };
  const keys = Array.from({ length: 20 }, (_, i) => `r${i}`);
  const wave = (n: number) => keys.map((key, i) => ({ key, partition: i % 2, value: JSON.stringify({ n }) }));
  await topicWith(names.TEST_FLOW_TOPIC, 2, wave(0));
  const client = await testClient('reminders-test');
  const env = { ...names, KFT_EXIT_WITH_PARENT: '0', TEST_PERSIST_EVERY_MS: '3000' };
  const workers: Worker[] = [startCli(['worker', reminders], env)];
  const reader = new PartitionReader(client);
  const outputs = () => readReminders(reader, names.TEST_OUTPUT_TOPIC);
  try {
    // Reminders fire and land; then more records re-arm them, and the worker is killed while fires
    // of the second wave are in memory, not persisted (it persists every 3 s).
    await eventually('the first reminders landed', async () => ((await outputs()).length >= keys.length ? true : undefined), 90_000, () => workers[0]!.output().slice(-2000));
    await send(client, names.TEST_FLOW_TOPIC, wave(1));
    await new Promise((r) => setTimeout(r, 1_800));
    workers[0]!.child.kill('SIGKILL');
    const b = startCli(['worker', reminders], env);
    workers.push(b);
    await send(client, names.TEST_FLOW_TOPIC, wave(2));
    // Every key's latest timer fires on the survivor: each key has fired at least twice by then.
    await eventually('every key fired again on the survivor', async () => firedAtLeast(await outputs(), keys, 2) || undefined, 120_000, () => b.output().slice(-2000));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await b.stop()).toBe(0);
    await expectOneReminderPerFire(names, await outputs(), keys);
  } finally {
    for (const key of Object.keys(names)) delete process.env[key];
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.stop()));
    await reader.close();
  }
}, 300_000);
