import { eventually, FlowCluster } from './harness';

// The Cassandra backend in real workers: snapshots in Cassandra (LWT-fenced), offsets committed by
// the consumer with its generation; a rebalance and a kill -9 keep the state exact.
test('workers persisting to Cassandra: rebalance and kill -9, state equals a plain fold', async () => {
  const cluster = new FlowCluster(3, { backend: 'cassandra', sessionTimeoutMs: 6000 });
  try {
    await cluster.start();
    await cluster.produce(1500);
    const a = cluster.startWorker('a');
    await eventually('a runs all partitions', () => cluster.runningOn(1), 120_000);
    const b = cluster.startWorker('b');
    await eventually('a and b share them', () => cluster.runningOn(2), 120_000);
    await cluster.produce(1500);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);
    const load = cluster.produce(1000);
    a.process.kill('SIGKILL');
    await load;
    await eventually('b runs all partitions', () => cluster.runningOn(1), 120_000);
    await eventually('caught up on b', () => cluster.caughtUp(), 60_000);
    expect(await cluster.stop(b)).toBe(0);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(4000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);
