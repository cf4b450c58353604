import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { ALERT_EVERY_CENTS, type Order, type SalesAlert, type SalesSession } from '../../../examples/sales/flow';
import { expectedTotals } from '../../../examples/sales/orders';
import { createKafkaClient, PartitionReader } from '../../../kafka';
import { flowColumnsStorage, renderPage } from '../../../scripts/temporal-ui';
import { inspectFlow } from '../../../workers/cli/inspect';
import { kafkaBrokers, unique } from '../../support/servers';
import { captureOutput } from '../../support/captured-child';

const root = path.resolve(__dirname, '../../..');

// `npm start` as a user runs it: servers, topic, two workers, the producer, the UI link and the
// live summary; it stops cleanly, and the persisted totals per store are exactly those of the
// orders folded (up to the committed offsets), and the alerts topic holds each threshold crossing
// of those totals exactly once, and the sessions topic each session of a store that ended (Dublin orders
// in bursts: its sessions end, 2 s of record time here) exactly once. While it runs, the Temporal UI (in a
// real headless Chromium) lists the flow's partition workflows.
test('the sales example runs, shows up in the Temporal UI, stops cleanly, and persists exact totals', async () => {
  const id = unique('sales');
  const alertsTopic = `${id}-alerts`;
  const sessionsTopic = `${id}-sessions`;
  const GAP_MS = 2_000;
  const env = {
    ...process.env,
    SALES_TOPIC: id,
    SALES_ALERTS_TOPIC: alertsTopic,
    SALES_SESSIONS_TOPIC: sessionsTopic,
    SALES_SESSION_GAP_MS: String(GAP_MS),
    SALES_FLOW: id,
    SALES_GROUP: id,
    SALES_RATE: '400',
    SALES_PERSIST_EVERY: '2s',
  };
  const child: ChildProcess = spawn(process.execPath, [path.join(root, 'bin/run-ts.js'), 'examples/sales/run.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const { output, exited } = captureOutput(child);
  try {
    const deadline = Date.now() + 240_000;
    while (!/partitions running 3\+3/.test(output())) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the example did not get both workers running:\n${output()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const ui = /Temporal UI: (\S+)/.exec(output())?.[1];
    expect(ui).toContain(encodeURIComponent(`KafkaFlow="${id}"`));
    // With the README's columns, each partition's row shows its phase, generation (lag and keys once
    // reported) and owner: the worker's group member id.
    const rowOf = (p: number) => new RegExp(`kafka-flow/${id}/${id}/${p}\\s+running\\s+(\\d+\\s+){1,3}kafka-flow-temporal-${id}-`);
    const rows = (text: string) => [0, 1, 2, 3, 4, 5].every((p) => rowOf(p).test(text));
    const { text } = await renderPage(ui!, { localStorage: flowColumnsStorage('default'), until: rows, timeoutMs: 120_000 });
    for (let p = 0; p < 6; p++) expect(text).toMatch(rowOf(p));

    // Dublin's first burst is its first 2,000 orders; its session ends once its partition's record
    // time is GAP_MS past them. Stop only after enough orders for that (the UI above can take 2 s or 120).
    const enough = 2_000 + 4 * GAP_MS * (Number(env.SALES_RATE) / 1000);
    const producedSoFar = () => Math.max(0, ...[...output().matchAll(/produced (\d+) \(/g)].map((m) => Number(m[1])));
    while (producedSoFar() < enough) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the example did not produce ${enough} orders:\n${output().slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    await new Promise((r) => setTimeout(r, 3000));
    child.kill('SIGINT'); // Ctrl-C
    const code = await exited;
    if (code !== 0) throw new Error(`the example exited with ${code} after Ctrl-C; its output ends:\n${output().slice(-6000)}`);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  const produced = Number(/produced (\d+) orders; workers exited with 0, 0/.exec(output())?.[1]);
  expect(produced).toBeGreaterThan(0);

  // A graceful stop flushes and commits what was folded; records still in flight stay for the
  // next run. So the persisted totals must equal a fold of exactly the orders below the committed
  // offsets — and those must be nearly all of them.
  const client = createKafkaClient({ brokers: kafkaBrokers, clientId: unique('sales-check'), logLevel: 'nothing' });
  const admin = client.kafka.admin();
  await admin.connect();
  const [committed] = await admin.fetchOffsets({ groupId: id, topics: [id] });
  await admin.disconnect();
  const reader = new PartitionReader(client);
  const expected = new Map<string, { orders: number; amountCents: number; lastOrderId: string }>();
  // Sessions as the flow ends them: per partition, before each order, every store whose last order
  // is GAP_MS or more behind the highest timestamp so far (earliest first) ends its session.
  const expectedSessions: SalesSession[] = [];
  let folded = 0;
  for (const { partition, offset } of committed!.partitions) {
    if (offset === '-1' || offset === '0') continue;
    let watermark = Number.NEGATIVE_INFINITY;
    const open = new Map<string, SalesSession>(); // this partition's stores' sessions
    await reader.read({
      topic: id,
      partition,
      fromOffset: '0',
      toOffset: offset,
      onRecords: (records) => {
        for (const r of records) {
          const o = JSON.parse(String(r.value)) as Order;
          const ts = Number(r.timestamp);
          watermark = Math.max(watermark, ts);
          const ended = [...open.values()].filter((x) => x.to + GAP_MS <= watermark).sort((a, b) => a.to - b.to || (a.store < b.store ? -1 : 1));
          for (const x of ended) {
            expectedSessions.push(x);
            open.delete(x.store);
          }
          const t = expected.get(o.store) ?? { orders: 0, amountCents: 0, lastOrderId: '' };
          expected.set(o.store, { orders: t.orders + 1, amountCents: t.amountCents + o.amountCents, lastOrderId: o.orderId });
          const x = open.get(o.store);
          open.set(o.store, { store: o.store, orders: (x?.orders ?? 0) + 1, amountCents: (x?.amountCents ?? 0) + o.amountCents, from: x?.from ?? ts, to: ts });
          folded++;
        }
      },
    });
  }
  // The alerts (read_committed): for each store, one per multiple of ALERT_EVERY_CENTS its
  // persisted total crossed — each exactly once, none for orders not yet committed.
  const alerts = new Map<string, number[]>();
  await reader.readTopic(alertsTopic, 6, (r) => {
    const a = JSON.parse(String(r.value)) as SalesAlert;
    expect(String(r.key)).toBe(a.store);
    alerts.set(a.store, [...(alerts.get(a.store) ?? []), a.crossedCents]);
  });
  const sessions: SalesSession[] = [];
  await reader.readTopic(sessionsTopic, 6, (r) => sessions.push(JSON.parse(String(r.value)) as SalesSession));
  await reader.close();
  const bySession = (a: SalesSession, b: SalesSession) => (a.store < b.store ? -1 : a.store > b.store ? 1 : a.from - b.from);
  expect(sessions.sort(bySession)).toEqual(expectedSessions.sort(bySession));
  expect(expectedSessions.map((x) => x.store)).toContain('dublin');
  const expectedAlerts = new Map<string, number[]>();
  for (const [store, t] of expected) {
    const crossed = Array.from({ length: Math.floor(t.amountCents / ALERT_EVERY_CENTS) }, (_, k) => (k + 1) * ALERT_EVERY_CENTS);
    if (crossed.length > 0) expectedAlerts.set(store, crossed);
  }
  for (const list of alerts.values()) list.sort((a, b) => a - b);
  expect(alerts).toEqual(expectedAlerts);
  expect([...alerts.values()].flat().length).toBeGreaterThan(0);
  expect(output()).toMatch(/outputs [1-9]\d*/);
  expect(folded).toBeGreaterThan(produced * 0.8);
  expect(expectedTotals(folded).size).toBe(expected.size);

  process.env.SALES_TOPIC = id;
  process.env.SALES_ALERTS_TOPIC = alertsTopic;
  process.env.SALES_FLOW = id;
  process.env.SALES_GROUP = id;
  jest.resetModules();
  const flow = (await import('../../../examples/sales/flow')).default;
  const persisted = new Map<string, unknown>();
  // The totals (each store's open session aside: checked by the sessions topic above).
  for await (const k of inspectFlow(flow as never)) {
    const { session: _open, ...totals } = k.state as { session?: unknown };
    persisted.set(k.key, totals);
  }
  expect(persisted).toEqual(expected);
}, 300_000);
