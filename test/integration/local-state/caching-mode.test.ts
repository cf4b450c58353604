// Local state with Kafka persistence in caching mode (plain writes, offsets committed by the
// consumer) on real workers, real Kafka and Temporal: a restart reads nothing from the snapshot
// topic, kill -9 under load costs only what came after the checkpoint, and with a bounded state
// cache a restart loads no key. After every step the persisted state equals a plain fold.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, FlowCluster } from '../orchestration/harness';
import { exact, killUnderLoad, lines, restored, settled } from './support';

test('caching mode with local state: a restart reads nothing from the topic, kill -9 under load reads the delta, the cache loads no key', async () => {
  const cluster = new FlowCluster(2, { backend: 'kafka-caching', persistEveryMs: 500, sessionTimeoutMs: 6000, keys: 300 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-caching-state-'));
  const snapshotTopic = cluster.snapshotTopic;
  try {
    await cluster.start();
    await cluster.produce(3000);
    const a1 = cluster.startWorker('a1', { KFT_STATE_DIR: dir });
    await settled(cluster, 1);
    await exact(cluster);
    expect(await cluster.stop(a1)).toBe(0);

    // A restart onto the intact store: nothing read from the topic.
    const a2 = cluster.startWorker('a2', { KFT_STATE_DIR: dir });
    await settled(cluster, 1);
    const again = restored(cluster, a2, snapshotTopic);
    expect([...again.keys()].sort()).toEqual([0, 1]);
    for (const r of again.values()) expect(r).toMatchObject({ fromTopic: 0 });
    expect([...again.values()].reduce((n, r) => n + r.fromLocal, 0)).toBe(300);

    // kill -9 under load: the next worker reads only what came after its checkpoint.
    await killUnderLoad(cluster, a2, 3000);
    const a3 = cluster.startWorker('a3', { KFT_STATE_DIR: dir, KFT_STATE_CACHE_MAX_KEYS: '20' });
    await eventually('a3 restored both partitions', () => restored(cluster, a3, snapshotTopic).size === 2, 90_000);
    await settled(cluster, 1);
    await exact(cluster);
    for (const r of restored(cluster, a3, snapshotTopic).values()) expect(r.fromLocal).toBeGreaterThan(0);
    // With the cache: no key loaded at the restore.
    expect(lines(cluster, a3).filter((l) => l.msg === 'partition recovered').map((l) => l.keys)).toEqual([0, 0]);
    await cluster.produce(3000);
    await cluster.untilCaughtUp('caught up with the cache');
    await exact(cluster);
    expect(await cluster.stop(a3)).toBe(0);
  } finally {
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600_000);
