import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { PartitionStatus } from '../../../workflows/partition-workflow';
import { freePort, privateCassandra } from '../../support/private-cassandra';
import { eventually, FlowCluster } from './harness';

// Self-healing on the real servers: a worker persisting to Cassandra (a private server this test
// freezes) loses its store for 20 s mid-run. Its persists fail, the partitions go to `retrying`,
// and once Cassandra answers again they recover on the same owner — no rebalance, no new
// assignment, nobody restarts anything — and the state is exactly a plain fold of the input.
test('Cassandra frozen for 20 s under load: the partitions retry on their owner and resume by themselves, state exact', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'kft-self-healing-'));
  const cassandra = privateCassandra(dataDir, await freePort(), await freePort());
  const saved = process.env.CASSANDRA_CONTACT_POINTS;
  const cluster = new FlowCluster(2, { backend: 'cassandra', persistEveryMs: 500, env: { CASSANDRA_CONTACT_POINTS: cassandra.contactPoint } });
  let paused = false;
  try {
    await cassandra.up();
    process.env.CASSANDRA_CONTACT_POINTS = cassandra.contactPoint; // inspect reads the private server too
    await cluster.start();
    await cluster.produce(1000);
    const w = cluster.startWorker('w');
    const before = await cluster.untilRunningOn(1, 'w runs both partitions', 120_000);
    await cluster.untilCaughtUp('caught up before the outage');

    const load = cluster.produce(1000);
    cassandra.pause();
    paused = true;
    const frozenAt = Date.now();
    let retrying: PartitionStatus | undefined;
    await eventually('a partition retrying', async () => {
      retrying = (await cluster.status()).find((s) => s.phase === 'retrying');
      return retrying;
    }, 60_000);
    const left = 20_000 - (Date.now() - frozenAt);
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    cassandra.resume();
    paused = false;
    await load;

    const after = await cluster.untilRunningOn(1, 'running again by themselves', 150_000);
    await cluster.untilCaughtUp('caught up after the outage', 90_000);
    // The same owner and generation throughout: healed in place, not by a rebalance.
    expect(after.map((s) => s.owner)).toEqual(before.map((s) => s.owner));
    expect(retrying!.retry?.lastError).toBeTruthy();
    // The offsets are committed in the owning process (its persist cadence, the idle flush); the
    // workflow clears a partition's retry when its next persist report comes, up to persistEvery later.
    const healed = await eventually(
      'every partition healthy again in its workflow (no retry)',
      async () => {
        const rows = await cluster.status();
        return rows.every((s) => s.retry === undefined) ? rows : undefined;
      },
      10_000,
    );
    expect(healed.reduce((n, s) => n + (s.counters.retries ?? 0), 0)).toBeGreaterThanOrEqual(1);

    expect(await cluster.stop(w)).toBe(0);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(2000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    if (paused) cassandra.resume();
    await cluster.close();
    if (saved === undefined) delete process.env.CASSANDRA_CONTACT_POINTS;
    else process.env.CASSANDRA_CONTACT_POINTS = saved;
    await cassandra.down().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 480_000);
