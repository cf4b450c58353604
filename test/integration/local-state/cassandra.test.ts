// Local state with Cassandra persistence (docs/local-state.md#cassandra-persistence) on real
// workers, real Kafka, Temporal and Cassandra, each worker process with its own KFT_STATE_DIR: a
// restart onto the intact store reads nothing from Cassandra; a partition another worker owned
// meanwhile is read from Cassandra again (its commits carry another store's lineage); kill -9
// under load loses and duplicates nothing (the store is written ahead of Cassandra); with a
// bounded state cache a restart loads no key. After every step the persisted state equals a plain
// fold of the input.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, FlowCluster, type Worker } from '../orchestration/harness';
import { exact, killUnderLoad, lines, settled } from './support';

/** Each partition's last "restored <topic>-<p>: N keys from local state, 0 from Cassandra" line. */
function fromLocal(cluster: FlowCluster, w: Worker): Map<number, number> {
  const out = new Map<number, number>();
  for (const l of lines(cluster, w)) {
    const m = /^restored (.+)-(\d+): (\d+) keys from local state, 0 from Cassandra$/.exec(l.msg);
    if (m && m[1] === cluster.names.topic) out.set(Number(m[2]), Number(m[3]));
  }
  return out;
}

/** The partitions whose store a worker discarded, with why. */
function discarded(cluster: FlowCluster, w: Worker): Map<number, string> {
  const out = new Map<number, string>();
  for (const l of lines(cluster, w)) {
    const m = /^local state of (.+)-(\d+) discarded: (.*); reading it from Cassandra$/.exec(l.msg);
    if (m && m[1] === cluster.names.topic) out.set(Number(m[2]), m[3]!);
  }
  return out;
}

const recoveredKeys = (cluster: FlowCluster, w: Worker) => lines(cluster, w).filter((l) => l.msg === 'partition recovered').map((l) => l.keys);

test('Cassandra with local state: a restart reads nothing from Cassandra, a partition owned elsewhere meanwhile is read again, kill -9 under load loses nothing', async () => {
  const cluster = new FlowCluster(2, { backend: 'cassandra', persistEveryMs: 500, sessionTimeoutMs: 6000, keys: 300 });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cassandra-state-'));
  const dirA = path.join(root, 'a');
  const dirB = path.join(root, 'b');
  try {
    await cluster.start();
    await cluster.produce(3000);

    // 1. First start: no local state, every key read from Cassandra (none yet) and written to the store.
    const a1 = cluster.startWorker('a1', { KFT_STATE_DIR: dirA });
    await settled(cluster, 1);
    await exact(cluster);
    expect(await cluster.stop(a1)).toBe(0);
    for (const p of [0, 1]) expect(lines(cluster, a1).some((l) => l.msg === `no local state of ${cluster.names.topic}-${p}: reading it from Cassandra`)).toBe(true);

    // 2. Restart onto the intact store: nothing read from Cassandra, every key from the store.
    const a2 = cluster.startWorker('a2', { KFT_STATE_DIR: dirA });
    await settled(cluster, 1);
    const again = fromLocal(cluster, a2);
    expect([...again.keys()].sort()).toEqual([0, 1]);
    expect([...again.values()].reduce((n, k) => n + k, 0)).toBe(300);
    for (const s of await cluster.status()) expect(s.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0, fromLocal: expect.any(Number) });
    await cluster.produce(2000);
    await cluster.untilCaughtUp('caught up after the restart');
    await exact(cluster);

    // 3. A second worker (its own store) takes one partition and commits; when it leaves, a2's store
    // of that partition is not the last committer's: read from Cassandra again. The other stays.
    const b = cluster.startWorker('b', { KFT_STATE_DIR: dirB });
    await settled(cluster, 2);
    const owners = await cluster.status();
    const moved = owners.find((s) => s.owner?.taskQueue !== owners.find((o) => o.partition === 0)!.owner?.taskQueue)?.partition ?? 1;
    await cluster.produce(2000);
    await eventually('caught up with b', () => cluster.caughtUp(), 60_000);
    expect(await cluster.stop(b)).toBe(0);
    await settled(cluster, 1);
    const why = await eventually('a2 read the moved partition from Cassandra again', () => discarded(cluster, a2).get(moved), 30_000);
    expect(why).toMatch(/another owner committed since/);
    await exact(cluster);

    // 4. kill -9 under load: the store is ahead of or at the commit, never behind — trusted, exact.
    await killUnderLoad(cluster, a2, 3000);
    const a3 = cluster.startWorker('a3', { KFT_STATE_DIR: dirA });
    await eventually('a3 restored both partitions from its store', () => fromLocal(cluster, a3).size === 2, 90_000, () => JSON.stringify([...discarded(cluster, a3)]));
    await settled(cluster, 1);
    await exact(cluster);
    expect(await cluster.stop(a3)).toBe(0);

    // 5. With a bounded state cache: a restart loads no key into memory, and folds on exactly.
    const cached = { KFT_STATE_DIR: dirA, KFT_STATE_CACHE_MAX_KEYS: '20' };
    const a4 = cluster.startWorker('a4', cached);
    await settled(cluster, 1);
    expect(fromLocal(cluster, a4).size).toBe(2);
    expect(recoveredKeys(cluster, a4)).toEqual([0, 0]);
    await cluster.produce(3000); // every key again: most read back from the store
    await cluster.untilCaughtUp('caught up with the cache');
    await exact(cluster);
    const live = (await cluster.status()).reduce((n, s) => n + (s.liveKeys ?? Number.NaN), 0);
    process.stderr.write(`cassandra local state: ${live} live keys of 300 with a bound of 20\n`);
    expect(live).toBeLessThan(300);
    expect(await cluster.stop(a4)).toBe(0);
  } finally {
    await cluster.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}, 600_000);
