import { freePort } from '../../../workers/observability/metrics-server';
import { workerMetric } from '../../support/metrics';
import { eventually, FlowCluster } from './harness';
import { PrivateTemporal } from './private-temporal';

/** Records folded so far, from the worker's own /metrics. */
const folded = (port: number) => workerMetric(port, 'kafka_flow_records_folded_total');

// A restart folds from its recovery on, ahead of its partition workflows (foldAtJoin): the
// worker's recovery at the join (fence, committed offset, state) needs Kafka only, and what comes
// in meanwhile is folded before the workflows' recover activity and fold loop take over. Shown with
// the Temporal server really frozen (SIGSTOP) from the moment the restarted worker is assigned its
// partitions: the backlog is folded, nothing is committed until Temporal is back, then the
// workflows take the partitions over without rewinding them — the persisted state equals a plain
// fold of the input. A private Temporal server (own port and data dir): the shared one stays up.
test('a restarted worker folds its backlog while the Temporal server is frozen, commits nothing until its workflows take over, and stays exact', async () => {
  const temporal = await PrivateTemporal.create();
  const metricsPort = await freePort();
  const cluster = new FlowCluster(2, { env: { TEMPORAL_ADDRESS: temporal.address } });
  let frozen: number | undefined;
  try {
    await temporal.up();
    await cluster.start();
    await cluster.produce(1000);
    const first = cluster.startWorker('first');
    await cluster.untilRunningOn(1, 'running on the first worker');
    await cluster.untilCaughtUp('the first worker caught up');
    expect(await cluster.stop(first)).toBe(0);

    await cluster.produce(2000); // the backlog the restart finds
    const committedBefore = await cluster.committedOffsets();
    const w = cluster.startWorker('restarted', { KFT_METRICS_PORT: String(metricsPort) });
    // Looked for every 10 ms: the workflows get their first task no sooner than a few hundred ms after it.
    for (const deadline = Date.now() + 60_000; !cluster.logLines<{ msg?: string }>(w).some((l) => l.msg === 'partitions assigned'); ) {
      if (Date.now() > deadline) throw new Error(`the restarted worker was not assigned its partitions within 60 s:\n${cluster.log(w)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    frozen = temporal.pid();
    process.kill(frozen, 'SIGSTOP');
    const frozenAt = Date.now();

    // Folded with Temporal frozen: ahead of the workflows, which cannot have run a task since.
    await eventually('the backlog folded while Temporal is frozen', async () => (await folded(metricsPort)) >= 2000 || undefined, 20_000);
    expect(await cluster.committedOffsets()).toEqual(committedBefore); // nothing persisted ahead of the workflows
    expect(Date.now() - frozenAt).toBeLessThan(20_000);
    process.kill(frozen, 'SIGCONT');
    frozen = undefined;

    await cluster.untilRunningOn(1, 'running once Temporal is back', 120_000);
    await cluster.untilCaughtUp('caught up once Temporal is back', 90_000);
    // The workflows' recover activities took the recoveries over as they were (no rewind).
    const taken = cluster.logLines<{ msg?: string; atJoin?: { foldingForMs?: number } }>(w).filter((l) => l.msg === 'recovered' && l.atJoin?.foldingForMs !== undefined);
    expect(taken.length).toBe(2);
    expect(await folded(metricsPort)).toBe(2000);
    expect(await cluster.stop(w)).toBe(0);

    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(3000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    if (frozen !== undefined) process.kill(frozen, 'SIGCONT');
    await cluster.close();
    await temporal.close();
  }
}, 400_000);
