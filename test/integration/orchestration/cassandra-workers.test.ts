import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
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
    const metricsPort = await freePort();
    const b = cluster.startWorker('b', { KFT_METRICS_PORT: String(metricsPort) });
    await eventually('a and b share them', () => cluster.runningOn(2), 120_000);
    await cluster.produce(1500);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);
    const load = cluster.produce(1000);
    a.process.kill('SIGKILL');
    await load;
    await eventually('b runs all partitions', () => cluster.runningOn(1), 120_000);
    await eventually('caught up on b', () => cluster.caughtUp(), 60_000);
    // The backend's own metrics are on the worker's /metrics: b's fenced writes and its recoveries.
    expect(await workerMetric(metricsPort, 'kafka_flow_cassandra_snapshot_writes_total', { outcome: 'applied' })).toBeGreaterThan(0);
    expect(await workerMetric(metricsPort, 'kafka_flow_cassandra_recovered_keys_total')).toBeGreaterThan(0);
    expect(await cluster.stop(b)).toBe(0);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(4000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);

// The configuration for write-heavy flows in real workers — the opt-in by-partition layout
// (snapshots clustered per Kafka partition in buckets, recovered by scanning them) fenced by write
// timestamp: a second worker's recovery after a rebalance and a kill -9 reads every key back from
// the buckets, its writes land over the killed owner's, and the state stays exact.
test("workers on the by-partition Cassandra layout with fencing 'timestamp': rebalance and kill -9, state equals a plain fold", async () => {
  const cluster = new FlowCluster(3, { backend: 'cassandra', cassandraLayout: 'by-partition', cassandraFencing: 'timestamp', sessionTimeoutMs: 6000 });
  try {
    await cluster.start();
    await cluster.produce(1000);
    const a = cluster.startWorker('a');
    await eventually('a runs all partitions', () => cluster.runningOn(1), 120_000);
    await eventually('caught up on a', () => cluster.caughtUp(), 60_000);
    const metricsPort = await freePort();
    const b = cluster.startWorker('b', { KFT_METRICS_PORT: String(metricsPort) });
    await eventually('a and b share them', () => cluster.runningOn(2), 120_000);
    const load = cluster.produce(1000);
    a.process.kill('SIGKILL');
    await load;
    await eventually('b runs all partitions', () => cluster.runningOn(1), 120_000);
    await eventually('caught up on b', () => cluster.caughtUp(), 60_000);
    // b recovered a's partitions from the buckets (every key of them was persisted by a), and wrote.
    expect(await workerMetric(metricsPort, 'kafka_flow_cassandra_recovered_keys_total')).toBeGreaterThan(0);
    expect(await workerMetric(metricsPort, 'kafka_flow_cassandra_snapshot_writes_total', { outcome: 'applied' })).toBeGreaterThan(0);
    expect(await cluster.stop(b)).toBe(0);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(2000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);
