import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
import { eventually, FlowCluster } from './harness';
import { PrivateTemporal } from './private-temporal';

/** Records folded so far, from the worker's own /metrics. */
const folded = (port: number) => workerMetric(port, 'kafka_flow_records_folded_total');

// The Temporal server (file-backed) restarted mid-run: folding never stops meanwhile (the consumer
// is the worker's own), the workflows resume from the file, and nothing is lost. A private Temporal
// server on its own port and data dir, so the shared one stays up for the other tests.
test('the Temporal server restarted mid-run: folding goes on, workflows resume, nothing lost', async () => {
  const temporal = await PrivateTemporal.create();
  const metricsPort = await freePort();
  const cluster = new FlowCluster(2, { env: { TEMPORAL_ADDRESS: temporal.address } });
  try {
    await temporal.up();
    await cluster.start();
    await cluster.produce(1000);
    const w = cluster.startWorker('w', { KFT_METRICS_PORT: String(metricsPort) });
    await eventually('running', () => cluster.runningOn(1), 90_000);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);
    const before = await folded(metricsPort);

    await temporal.down();
    await cluster.produce(1000);
    // Folding goes on without Temporal: the records are folded (not yet persisted or committed).
    await eventually('folded while Temporal is down', async () => (await folded(metricsPort)) >= before + 1000, 30_000);
    await new Promise((r) => setTimeout(r, 12_000)); // longer than the activities' heartbeat timeout

    await temporal.up(); // same database file: the workflows are still there
    await cluster.produce(500);
    const resumed = await eventually('workflows resumed and running', () => cluster.runningOn(1), 120_000);
    expect(resumed.every((p) => p.counters.runs >= 1)).toBe(true);
    await eventually('caught up after the restart', () => cluster.caughtUp(), 90_000);
    expect(await cluster.stop(w)).toBe(0);

    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(2500);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
    await temporal.close();
  }
}, 400_000);
