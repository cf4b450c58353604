// The bounded state cache (KFT_STATE_CACHE_MAX_KEYS / _MAX_BYTES, FlowOptions.stateCache) on real
// workers, real Kafka and Temporal: a worker holds at most its bound of 2,000 keys in memory (the
// rest in its local store, read back when a record comes for them), a restart onto its intact store
// loads no key, and kill -9 under load loses and duplicates nothing; a byte bound holds the bytes
// the worker's own metrics count, from the sizes of the records it really wrote and read. After
// every step the persisted state equals a plain fold of the input.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KEY_BYTES } from '../../../flow/state-cache';
import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
import { eventually, FlowCluster } from '../orchestration/harness';
import { exact, killUnderLoad, lines, restored, settled } from './support';

const KEYS = 2000;
const MAX_KEYS = 100;

test('at most 100 of 2,000 keys in memory, exact; a restart loads no key; kill -9 under load loses nothing', async () => {
  const cluster = new FlowCluster(2, { persistEveryMs: 500, sessionTimeoutMs: 6000, keys: KEYS });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cache-'));
  const env = { KFT_STATE_DIR: dir, KFT_STATE_CACHE_MAX_KEYS: String(MAX_KEYS) };
  const snapshotTopic = `${cluster.names.group}-${cluster.names.name}-snapshots`;
  /** The live keys of both partitions as their workflows last heard (after a persist and its unloads). */
  const liveKeys = async () => (await cluster.status()).reduce((n, s) => n + (s.liveKeys ?? Number.NaN), 0);
  try {
    await cluster.start();
    await cluster.produce(10_000);

    // 1. Every key seen five times by a worker holding at most 100.
    const a1 = cluster.startWorker('a1', env);
    await settled(cluster, 1);
    await exact(cluster);
    await cluster.produce(4000); // every key again: most are read back from the store
    await cluster.untilCaughtUp('caught up after the second pass');
    await exact(cluster);
    const bounded = await eventually('the live keys within the bound', async () => ((await liveKeys()) <= MAX_KEYS ? liveKeys() : undefined), 30_000, async () => String(await liveKeys()));
    process.stderr.write(`state-cache: ${bounded} live keys of ${KEYS} after two passes (bound ${MAX_KEYS})\n`);
    expect(await cluster.stop(a1)).toBe(0);

    // 2. A restart onto the intact store: nothing read from the topic, no key loaded.
    const a2 = cluster.startWorker('a2', env);
    await settled(cluster, 1);
    const again = restored(cluster, a2, snapshotTopic);
    expect([...again.keys()].sort()).toEqual([0, 1]);
    for (const r of again.values()) expect(r).toMatchObject({ fromTopic: 0 });
    expect([...again.values()].reduce((n, r) => n + r.fromLocal, 0)).toBe(KEYS);
    const recoveredKeys = lines(cluster, a2).filter((l) => l.msg === 'partition recovered').map((l) => l.keys);
    expect(recoveredKeys).toEqual([0, 0]);
    await cluster.produce(3000);
    await cluster.untilCaughtUp('caught up after the restart');
    await exact(cluster);

    // 3. kill -9 under load: the next worker restores the delta and folds on exactly.
    await killUnderLoad(cluster, a2, 3000);
    const running = cluster.startWorker('a3', env);
    await eventually('a3 restored both partitions', () => restored(cluster, running, snapshotTopic).size === 2, 90_000);
    await settled(cluster, 1);
    await exact(cluster);
    expect(lines(cluster, running).filter((l) => l.msg === 'partition recovered').map((l) => l.keys)).toEqual([0, 0]);
    expect(await cluster.stop(running)).toBe(0);
  } finally {
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600_000);

test('a byte bound (KFT_STATE_CACHE_MAX_BYTES): the keys in memory count their stored records\' bytes and stay within it, exact', async () => {
  const MAX_BYTES = 40_000;
  const cluster = new FlowCluster(2, { persistEveryMs: 500, sessionTimeoutMs: 6000, keys: KEYS });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cache-bytes-'));
  const metricsPort = await freePort();
  const env = { KFT_STATE_DIR: dir, KFT_STATE_CACHE_MAX_BYTES: String(MAX_BYTES), KFT_METRICS_PORT: String(metricsPort) };
  const liveKeys = async () => (await cluster.status()).reduce((n, s) => n + (s.liveKeys ?? Number.NaN), 0);
  try {
    await cluster.start();
    await cluster.produce(10_000);
    const w = cluster.startWorker('b1', env);
    await settled(cluster, 1);
    await cluster.produce(4000); // every key again: most are read back from the store, with their sizes
    await cluster.untilCaughtUp('caught up after the second pass');
    await exact(cluster);
    const bytes = await eventually(
      'the live bytes within the bound',
      async () => {
        const b = await workerMetric(metricsPort, 'kafka_flow_keys_live_bytes');
        return b > 0 && b <= MAX_BYTES ? b : undefined;
      },
      30_000,
      async () => String(await workerMetric(metricsPort, 'kafka_flow_keys_live_bytes')),
    );
    const keys = await workerMetric(metricsPort, 'kafka_flow_keys_live');
    process.stderr.write(`state-cache: ${keys} live keys of ${KEYS}, ${bytes} bytes (bound ${MAX_BYTES})\n`);
    // Each key counts its stored record (tens of bytes here) besides KEY_BYTES: the sizes came from the real writes and reads.
    expect(bytes).toBeGreaterThan(keys * KEY_BYTES);
    expect(keys).toBeLessThan(MAX_BYTES / KEY_BYTES);
    // The partition workflows show it too, from their next report (the one before may predate the unload).
    await eventually('the workflows\' live keys within the bound', async () => ((await liveKeys()) < MAX_BYTES / KEY_BYTES ? true : undefined), 30_000, async () => String(await liveKeys()));
    expect(await cluster.stop(w)).toBe(0);
  } finally {
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);
