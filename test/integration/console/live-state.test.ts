// Health endpoints and live state queries on real worker processes (the CLI's `worker`, real Kafka,
// Temporal, Cassandra): `/healthz`, `/readyz` going 503 → 200 as the partitions are recovered,
// `get` and `GET /flows/<flow>/keys/<key>` answering the owner's live state before it is persisted
// (persistEvery 2 min, no idle flush) — asked of either worker, the other's keys forwarded to their
// owner — 404 for an unknown key, and the persisted snapshot once no live owner answers.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { HashState } from '../../fixtures/offset-hash-flow';
import { partitionOfKey } from '../../../workers/keys/key-partition';
import { freePort } from '../../../workers/observability/metrics-server';
import { eventually, FlowCluster, type Worker } from '../orchestration/harness';

const root = path.join(__dirname, '../../..');
const bin = path.join(root, 'bin/kafka-flow-temporal.js');
const flowModule = path.join(root, 'test/fixtures/offset-hash-flow.ts');
const KEYS = 12;
const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cliEnv(cluster: FlowCluster): NodeJS.ProcessEnv {
  const n = cluster.names;
  return {
    ...process.env,
    TEST_FLOW_NAME: n.name,
    TEST_FLOW_GROUP: n.group,
    TEST_FLOW_TOPIC: n.topic,
    TEST_FLOW_BACKEND: n.backend,
    TEST_PERSIST_EVERY_MS: String(n.persistEveryMs),
    TEST_IDLE_FLUSH: 'off',
  };
}

async function get(cluster: FlowCluster, key: string): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, 'get', flowModule, key], { env: cliEnv(cluster), timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function http(port: number, p: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${port}${p}`, { signal: AbortSignal.timeout(20_000) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const keyPath = (cluster: FlowCluster, key: string) => `/flows/${encodeURIComponent(cluster.names.name)}/keys/${encodeURIComponent(key)}`;

/** Every key's state folded from the input so far, by the test's own fold of the topic. */
async function expectedStates(cluster: FlowCluster): Promise<Map<string, HashState>> {
  const reference = await cluster.reference();
  expect([...reference.keys()].sort()).toEqual([...keys].sort());
  return reference;
}

/** Polls `/readyz` from the worker's start until it answers 200; returns every status seen, in order. */
async function readyzUntilReady(port: number, w: Worker, timeoutMs = 120_000): Promise<Array<{ status: number; body: Record<string, unknown> }>> {
  const seen: Array<{ status: number; body: Record<string, unknown> }> = [];
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (w.process.exitCode !== null) throw new Error(`worker ${w.name} exited with ${w.process.exitCode}`);
    const r = await http(port, '/readyz').catch(() => undefined);
    if (r) {
      seen.push(r);
      if (r.status === 200) return seen;
    }
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`/readyz of ${w.name} did not answer 200 within ${timeoutMs} ms; last: ${JSON.stringify(seen.at(-1))}`);
}

describe('live state queries and health endpoints on real workers', () => {
  test('Kafka persistence: readyz 503 → 200; get and the endpoint of either worker answer the owner\'s unpersisted state; 404; the snapshot once no owner runs', async () => {
    const cluster = new FlowCluster(4, { persistEveryMs: 120_000, idleFlush: false, keys: KEYS });
    try {
      await cluster.start();
      await cluster.produce(120);
      const [portA, portB] = [await freePort(), await freePort()];
      const a = cluster.startWorker('a', { KFT_METRICS_PORT: String(portA) });

      // /readyz answers from the start: 503 saying what is not ready, 200 once every partition folds.
      const seen = await readyzUntilReady(portA, a);
      expect(seen[0]!.status).toBe(503);
      expect(seen[0]!.body).toMatchObject({ ready: false });
      expect((seen[0]!.body.notReady as string[]).join('; ')).toMatch(/worker: starting|group: not joined|partitions not folding/);
      expect(seen.at(-1)!.body).toEqual({ ready: true, assigned: 4, folding: 4 });
      expect(await http(portA, '/healthz')).toEqual({ status: 200, body: { alive: true } });
      expect((await fetch(`http://127.0.0.1:${portA}/metrics`)).status).toBe(200);

      const b = cluster.startWorker('b', { KFT_METRICS_PORT: String(portB) });
      const rows = await cluster.untilRunningOn(2, 'the partitions spread over both workers');
      await readyzUntilReady(portB, b);
      const addresses = new Set(rows.map((r) => r.owner?.httpAddress));
      expect(addresses).toEqual(new Set([`http://127.0.0.1:${portA}`, `http://127.0.0.1:${portB}`]));

      // Records folded by their owners, none persisted (persistEvery 2 min, no idle flush).
      await cluster.produce(240);
      const expected = await expectedStates(cluster);
      const ownerOf = new Map(rows.map((r) => [r.partition, r.owner!]));
      for (const key of keys) {
        const partition = partitionOfKey(key, 4);
        const want = expected.get(key)!;
        for (const port of [portA, portB]) {
          const answer = await eventually(`${key} at its latest state through worker ${port}`, async () => {
            const r = await http(port, keyPath(cluster, key));
            return r.status === 200 && (r.body.state as HashState).count === want.count ? r : undefined;
          });
          expect(answer.body).toMatchObject({
            source: 'owner',
            flow: cluster.names.name,
            topic: cluster.names.topic,
            partition,
            key,
            state: want,
            offset: want.last,
            persisted: false,
            from: 'memory',
            owner: { generation: ownerOf.get(partition)!.generation, httpAddress: ownerOf.get(partition)!.httpAddress },
          });
          expect(BigInt(answer.body.position as string)).toBeGreaterThan(BigInt(want.last));
        }
      }
      // What is persisted (the flush on revoke when b joined) is behind every key's live state.
      const persisted = await cluster.persisted();
      for (const key of keys) expect(persisted.get(key)?.count ?? 0).toBeLessThan(expected.get(key)!.count);

      const cli = await get(cluster, 'k5');
      expect(cli.code).toBe(0);
      expect(JSON.parse(cli.stdout)).toMatchObject({ source: 'owner', key: 'k5', state: expected.get('k5'), persisted: false });
      expect(cli.stderr).toBe('');

      // Unknown keys: 404 (a key needing URL encoding included), the CLI exits 1 naming the error.
      const unknown = await http(portA, keyPath(cluster, 'no such/key?'));
      expect(unknown.status).toBe(404);
      expect(unknown.body.error).toBe('KeyNotFoundError');
      const cliUnknown = await get(cluster, 'no-such-key');
      expect(cliUnknown.code).toBe(1);
      expect(cliUnknown.stderr).toMatch(/KeyNotFoundError: no state for the key in .*not in its owner's memory or store/);
      expect((await http(portA, '/flows/another-flow/keys/k1')).status).toBe(404);
      expect((await http(portA, `${keyPath(cluster, 'k1')}?partition=99`)).status).toBe(400);

      // Both stop gracefully (flushOnRevoke persists): no live owner, the persisted snapshot, saying so.
      expect(await cluster.stop(b)).toBe(0);
      expect(await cluster.stop(a)).toBe(0);
      const fallback = await get(cluster, 'k5');
      expect(fallback.code).toBe(0);
      expect(JSON.parse(fallback.stdout)).toMatchObject({ source: 'snapshot', key: 'k5', state: expected.get('k5'), offset: expected.get('k5')!.last, persisted: true });
      expect(fallback.stderr).toMatch(/^no live owner answered \(.+\): the persisted snapshot\n$/);
    } finally {
      await cluster.close();
    }
  }, 360_000);

  test('Cassandra persistence: the owner\'s unpersisted state; the snapshot with no live owner, and from an owner without an HTTP port (saying so)', async () => {
    const cluster = new FlowCluster(2, { backend: 'cassandra', persistEveryMs: 120_000, idleFlush: false, keys: KEYS });
    try {
      await cluster.start();
      const port = await freePort();
      const a = cluster.startWorker('a', { KFT_METRICS_PORT: String(port) });
      await readyzUntilReady(port, a);
      await cluster.produce(96);
      const expected = await expectedStates(cluster);
      const want = expected.get('k7')!;
      const live = await eventually('k7 at its latest state from its owner', async () => {
        const r = await get(cluster, 'k7');
        const answer = r.code === 0 ? JSON.parse(r.stdout) : undefined;
        return answer?.state?.count === want.count ? { r, answer } : undefined;
      });
      expect(live.answer).toMatchObject({ source: 'owner', key: 'k7', state: want, offset: want.last, persisted: false, from: 'memory', owner: { httpAddress: `http://127.0.0.1:${port}` } });
      expect(live.r.stderr).toBe('');
      expect((await http(port, keyPath(cluster, 'k7'))).body).toMatchObject({ source: 'owner', state: want, persisted: false });
      expect((await http(port, keyPath(cluster, 'unknown'))).status).toBe(404);

      // Stopped gracefully (the flush on revoke persists): the snapshot, saying there is no live owner.
      expect(await cluster.stop(a)).toBe(0);
      const idle = await get(cluster, 'k7');
      expect(idle.code).toBe(0);
      expect(JSON.parse(idle.stdout)).toMatchObject({ source: 'snapshot', key: 'k7', state: want, offset: want.last, persisted: true });
      // Why depends on who else runs in the namespace: no worker answers the status query, or one
      // (of another test file, two run at a time) answers that the partition is idle.
      expect(idle.stderr).toMatch(/^no live owner answered \(.+\): the persisted snapshot\n$/);

      // A worker without an HTTP port owns the partitions: it cannot be asked; the snapshot, saying why.
      cluster.startWorker('c');
      await cluster.untilRunningOn(1, 'the partitions running on the worker without an HTTP port');
      const noHttp = await get(cluster, 'k7');
      expect(noHttp.code).toBe(0);
      expect(JSON.parse(noHttp.stdout)).toMatchObject({ source: 'snapshot', state: want, persisted: true });
      expect(JSON.parse(noHttp.stdout).reason).toMatch(/serves no HTTP port: start its workers with --metrics-port/);
      expect(noHttp.stderr).toContain('serves no HTTP port');
    } finally {
      await cluster.close();
    }
  }, 360_000);
});
