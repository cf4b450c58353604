// Local state (docs/local-state.md) on real workers, real Kafka and Temporal: each worker process
// gets its own KFT_STATE_DIR. A restart with intact local state reads nothing from the snapshot
// topic; a partition that moved to another worker and back reads only what was written meanwhile;
// kill -9 under load costs only the delta; a corrupted or deleted state directory means a full
// restore (with a warning for the corrupted one). After every step the persisted state equals a
// plain fold of the input, and so does what the restored workers go on to persist.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, FlowCluster, type Worker } from '../orchestration/harness';
import { exact, lines, restored, settled } from './support';

/**
 * The worker-wide lines ("restored N partition(s) of flow F in this rebalance: L from local
 * state, T from the topic, ..."). The worker logs one per burst of restores (500 ms quiet), so the
 * restores of one rebalance may come as several lines when they are spread out in time.
 */
function rounds(cluster: FlowCluster, w: Worker): Array<{ partitions: number; fromLocal: number; fromTopic: number }> {
  const out: Array<{ partitions: number; fromLocal: number; fromTopic: number }> = [];
  for (const l of lines(cluster, w)) {
    const m = /^restored (\d+) partition\(s\) of flow .* in this rebalance: (\d+) from local state, (\d+) from the topic/.exec(l.msg);
    if (m) out.push({ partitions: Number(m[1]), fromLocal: Number(m[2]), fromTopic: Number(m[3]) });
  }
  return out;
}

test('restarts, a partition moving away and back, kill -9 under load, corrupted and deleted state: only deltas are read, the state stays exact', async () => {
  const cluster = new FlowCluster(2, { persistEveryMs: 500, sessionTimeoutMs: 6000, keys: 300 });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-state-'));
  const dirA = path.join(root, 'a');
  const dirB = path.join(root, 'b');
  const snapshotTopic = `${cluster.names.group}-${cluster.names.name}-snapshots`;
  try {
    await cluster.start();
    await cluster.produce(3000);

    // 1. First start: no checkpoint anywhere.
    const a1 = cluster.startWorker('a1', { KFT_STATE_DIR: dirA });
    await settled(cluster, 1);
    expect(await cluster.stop(a1)).toBe(0);
    const first = lines(cluster, a1);
    for (const p of [0, 1]) expect(first.some((l) => l.msg === `no checkpoint, restoring from the start of ${snapshotTopic}-${p}`)).toBe(true);
    await exact(cluster);

    // 2. Restart with intact local state: nothing read from the topic.
    const a2 = cluster.startWorker('a2', { KFT_STATE_DIR: dirA });
    await settled(cluster, 1);
    const again = restored(cluster, a2, snapshotTopic);
    expect([...again.keys()].sort()).toEqual([0, 1]);
    for (const r of again.values()) {
      expect(r.fromTopic).toBe(0);
      expect(r.fromLocal).toBeGreaterThan(0);
    }
    // Both restores are summed up worker-wide, in one line or in several (one per burst).
    const summed = await eventually(
      'the worker-wide restore line(s) covering both partitions',
      () => {
        const r = rounds(cluster, a2);
        return r.reduce((n, x) => n + x.partitions, 0) >= 2 ? r : undefined;
      },
      10_000,
      () => JSON.stringify(rounds(cluster, a2)),
    );
    expect(summed.reduce((n, x) => n + x.partitions, 0)).toBe(2);
    expect(summed.reduce((n, x) => n + x.fromTopic, 0)).toBe(0);
    expect(summed.reduce((n, x) => n + x.fromLocal, 0)).toBe([...again.values()].reduce((n, r) => n + r.fromLocal, 0));
    const status = await cluster.status();
    for (const s of status) expect(s.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0 });

    // 3. A second worker takes one partition (full restore there), writes, leaves: the partition
    // comes back to a2, which reads only what b wrote meanwhile.
    const b = cluster.startWorker('b', { KFT_STATE_DIR: dirB });
    await settled(cluster, 2);
    const moved = (await cluster.status()).find((s) => s.owner?.taskQueue !== status[0]!.owner?.taskQueue)!.partition;
    await cluster.produce(2000);
    await eventually('caught up with b', () => cluster.caughtUp(), 60_000);
    expect(await cluster.stop(b)).toBe(0);
    await settled(cluster, 1);
    const back = restored(cluster, a2, snapshotTopic).get(moved)!;
    expect(back.fromLocal).toBeGreaterThan(0);
    expect(back.fromTopic).toBeGreaterThan(0);
    // Less than the partition's records: b wrote its keys a few times (persist every 500 ms), a
    // full restore would have read every record below the same bound.
    expect(back.bound).toBeDefined();
    const fullRead = await cluster.snapshotRecords(moved, { toOffset: back.bound });
    const delta = await cluster.snapshotRecords(moved, { fromOffset: back.fromOffset, toOffset: back.bound });
    process.stderr.write(
      `local-state: partition ${moved} back from b: ${back.fromLocal} keys from local state, ${back.fromTopic} records from the topic ` +
        `(offsets ${back.fromOffset}..${back.bound}), a full restore: ${fullRead.records.length} records\n`,
    );
    expect(back.fromTopic).toBe(delta.records.length); // what it read is exactly the records after its checkpoint
    expect(back.fromTopic).toBeLessThan(fullRead.records.length);
    const written = (await cluster.status()).find((s) => s.partition === moved)!;
    expect(written.lastRecovery).toMatchObject({ restore: 'delta' });
    await exact(cluster);

    // 4. kill -9 under load (mid-persist at some point: a persist runs every 500 ms), twice.
    for (const name of ['a3', 'a4']) {
      const load = cluster.produce(3000);
      await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 700)));
      const running = name === 'a3' ? a2 : cluster.startWorker('a3-again', { KFT_STATE_DIR: dirA });
      if (name === 'a4') {
        await eventually('a3-again restored both partitions', () => restored(cluster, running, snapshotTopic).size === 2, 90_000);
        await settled(cluster, 1);
        await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 700)));
      }
      running.process.kill('SIGKILL');
      await running.exited;
      await load;
      const next = cluster.startWorker(name, { KFT_STATE_DIR: dirA });
      // The workflows show the killed worker running until its session times out: wait for the new one's restores.
      await eventually(`${name} restored both partitions`, () => restored(cluster, next, snapshotTopic).size === 2, 90_000);
      await settled(cluster, 1);
      const afterCrash = restored(cluster, next, snapshotTopic);
      process.stderr.write(`local-state: after kill -9 (${name}): ${JSON.stringify(Object.fromEntries(afterCrash))}\n`);
      for (const p of [0, 1]) {
        const r = afterCrash.get(p)!;
        expect(r.fromLocal).toBeGreaterThan(0);
        // The delta, not the partition: the records after the local checkpoint, fewer than a full
        // restore below the same bound. (A kill between a transaction's commit and its LMDB write
        // legitimately costs that one transaction: with every key written per persist the delta
        // can equal the key count, so the yardstick is the full read, not the keys.)
        expect(r.bound).toBeDefined();
        expect(BigInt(r.fromOffset ?? '0')).toBeGreaterThan(0n);
        const fullRead = await cluster.snapshotRecords(p, { toOffset: r.bound });
        const delta = await cluster.snapshotRecords(p, { fromOffset: r.fromOffset, toOffset: r.bound });
        expect(r.fromTopic).toBe(delta.records.length);
        expect(r.fromTopic).toBeLessThan(fullRead.records.length);
      }
      await exact(cluster);
      if (name === 'a4') expect(await cluster.stop(next)).toBe(0);
      else {
        next.process.kill('SIGKILL'); // leaves the next round's starter to rejoin
        await next.exited;
      }
    }

    // 5. Corrupt partition 0's state file, delete partition 1's store: full restores, exact state.
    const store0 = fs.readdirSync(path.join(dirA, cluster.names.group, cluster.names.name)).find((d) => d.endsWith('-0'))!;
    const file0 = path.join(dirA, cluster.names.group, cluster.names.name, store0, 'data.mdb');
    const bytes = fs.readFileSync(file0);
    for (let i = 4096; i < bytes.length; i += 997) bytes[i] = bytes[i]! ^ 0x5a;
    fs.writeFileSync(file0, bytes);
    fs.rmSync(path.join(dirA, cluster.names.group, cluster.names.name, store0.replace(/-0$/, '-1')), { recursive: true });
    const a5 = cluster.startWorker('a5', { KFT_STATE_DIR: dirA });
    await eventually('a5 restored both partitions', () => restored(cluster, a5, snapshotTopic).size === 2, 90_000);
    await settled(cluster, 1);
    const l5 = lines(cluster, a5);
    expect(l5.some((l) => l.level === 40 && l.msg.startsWith(`local state of ${snapshotTopic}-0 discarded: state file checksum mismatch`))).toBe(true);
    expect(l5.some((l) => l.msg === `no checkpoint, restoring from the start of ${snapshotTopic}-1`)).toBe(true);
    const full = restored(cluster, a5, snapshotTopic);
    for (const p of [0, 1]) expect(full.get(p)).toMatchObject({ fromLocal: 0 });
    await cluster.produce(500);
    await eventually('caught up after the full restore', () => cluster.caughtUp(), 60_000);
    expect(await cluster.stop(a5)).toBe(0);
    await exact(cluster);
  } finally {
    await cluster.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}, 400_000);
