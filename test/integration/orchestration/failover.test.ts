import { eventually, FlowCluster } from './harness';

// kill -9 of a worker under load: the survivor takes over its partitions (after the session
// timeout) and the final state equals a plain fold of the input — nothing lost, nothing applied
// twice (the offset-hash fold would show either).
test('kill -9 of a worker: the survivor takes over and the state stays exact', async () => {
  const cluster = new FlowCluster(4, { sessionTimeoutMs: 6000 });
  try {
    await cluster.start();
    await cluster.produce(2000);
    const a = cluster.startWorker('a');
    const b = cluster.startWorker('b');
    await eventually('a and b share the partitions', () => cluster.runningOn(2), 120_000);
    await cluster.produce(2000);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);

    // Records arrive while a dies: some are folded by a and never persisted.
    const load = cluster.produce(2000);
    a.process.kill('SIGKILL');
    const killedAt = Date.now();
    await load;
    const taken = await eventually('b runs all 4 partitions', () => cluster.runningOn(1), 120_000);
    const failoverMs = Date.now() - killedAt;
    expect(taken.every((p) => p.owner?.taskQueue === taken[0]!.owner?.taskQueue)).toBe(true);
    await cluster.produce(1000);
    await eventually('caught up on the survivor', () => cluster.caughtUp(), 60_000);
    expect(await cluster.stop(b)).toBe(0);

    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(7000);
    expect(await cluster.persisted()).toEqual(reference);
    process.stderr.write(`failover: partitions processing again on the survivor ${failoverMs} ms after kill -9\n`);
  } finally {
    await cluster.close();
  }
}, 400_000);
