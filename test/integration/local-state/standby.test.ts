// Standby replicas (KFT_STANDBY_REPLICAS, FlowOptions.standbyReplicas) on real workers, real Kafka
// and Temporal: each of two workers keeps a warm copy of the partitions the other owns (tailing
// their snapshot partitions into its own local store); when one is killed -9 under load, the
// survivor takes its partitions over restoring only the records written since its copy's last
// round — far fewer than a full restore reads — and the state stays exact.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { flowStatusRows, formatStatus } from '../../../workers/cli/flow-status';
import { eventually, FlowCluster } from '../orchestration/harness';
import { exact, lines, restored, settled } from './support';

test('a standby copy on the other worker: after kill -9 of the owner the survivor restores only the delta, exact', async () => {
  const cluster = new FlowCluster(4, { persistEveryMs: 500, sessionTimeoutMs: 6000, keys: 400 });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-standby-'));
  // An HTTP port each: `status` asks the owners for their standby copies.
  const env = (name: string) => ({ KFT_STATE_DIR: path.join(root, name), KFT_STANDBY_REPLICAS: '1', KFT_METRICS_PORT: '0' });
  const snapshotTopic = `${cluster.names.group}-${cluster.names.name}-snapshots`;
  try {
    await cluster.start();
    await cluster.produce(6000);
    const a = cluster.startWorker('a', env('a'));
    const b = cluster.startWorker('b', env('b'));
    await cluster.untilRunningOn(2, 'running on a and b', 120_000);
    await cluster.untilCaughtUp('caught up on two workers');
    await exact(cluster);

    // Each worker keeps standby copies of the partitions the other owns: every partition once.
    const standbyOf = (w: typeof a) =>
      new Set(lines(cluster, w).flatMap((l) => (typeof l.msg === 'string' && l.msg.startsWith(`standby replica of ${snapshotTopic}-`) ? [Number(l.msg.slice(`standby replica of ${snapshotTopic}-`.length).split(' ')[0])] : [])));
    await eventually('both workers keep standby copies', () => standbyOf(a).size > 0 && standbyOf(b).size > 0, 30_000);
    const aStandby = standbyOf(a);
    const bStandby = standbyOf(b);
    for (const p of aStandby) expect(bStandby.has(p)).toBe(false);
    expect(new Set([...aStandby, ...bStandby]).size).toBe(4);
    // `status` shows each partition's standby copy: on the worker that does not own it, with its lag.
    const rows = await eventually('status shows a standby copy of every partition', async () => {
      const r = await flowStatusRows(cluster.names.name, { queryTimeoutMs: 5_000 });
      return r.length === 4 && r.every((row) => row.source === 'query' && row.standbys?.length === 1) ? r : undefined;
    }, 30_000);
    for (const row of rows) {
      if (row.source !== 'query') continue;
      expect(row.standbys![0]!.worker).not.toBe(row.owner?.taskQueue);
      expect(typeof row.standbys![0]!.lag).toBe('number');
    }
    expect(formatStatus(rows).split('\n')[0]).toMatch(/ standby$/);

    // More input, the standbys catch up (a round a second), then a dies under load.
    await cluster.produce(3000);
    await cluster.untilCaughtUp('caught up again');
    await new Promise((r) => setTimeout(r, 2500));
    const load = cluster.produce(2000);
    await new Promise((r) => setTimeout(r, 300));
    a.process.kill('SIGKILL');
    await a.exited;
    await load;
    // b takes a's partitions (those it kept a copy of) after the session timeout.
    await eventually('b restored the partitions it kept standby copies of', () => [...bStandby].every((p) => restored(cluster, b, snapshotTopic).has(p)), 90_000);
    await settled(cluster, 1);
    await exact(cluster);
    const taken = restored(cluster, b, snapshotTopic);
    for (const p of bStandby) {
      const r = taken.get(p)!;
      const full = await cluster.snapshotRecords(p, { toOffset: r.bound });
      process.stderr.write(`standby: partition ${p} taken over by b: ${r.fromLocal} keys from its standby copy, ${r.fromTopic} records from the topic; a full restore: ${full.records.length} records\n`);
      expect(r.fromLocal).toBeGreaterThan(0);
      expect(r.fromTopic).toBeLessThan(full.records.length / 2);
    }
    for (const s of await cluster.status()) if (bStandby.has(s.partition)) expect(s.lastRecovery).toMatchObject({ restore: 'delta' });
    expect(await cluster.stop(b)).toBe(0);
  } finally {
    await cluster.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}, 600_000);
