import { partitionWorkflowId, type RestoringSignal } from '../../../workflows/partition-workflow';
import { eventually, FlowCluster } from './harness';

// A real worker's recovery of a partition with many snapshots tells its partition workflow how far
// it is while it reads (KFT_RESTORE_REPORT_EVERY_MS; 10 s by default, 20 ms here so that a read of
// 40,000 snapshot records sends several): the `restoring` signals in the workflow's history come
// from the new owner, count snapshot records, and their share of the snapshot partition grows to
// at most 1. What the workflow does with them (the details panel, the status) is in
// test/integration/workflows/partition-workflow.test.ts.
test("a long recovery's progress reaches its partition workflow as `restoring` signals", async () => {
  const cluster = new FlowCluster(1, { keys: 40_000 });
  try {
    await cluster.start();
    await cluster.produce(40_000);
    const a = cluster.startWorker('a');
    await cluster.untilCaughtUp('the first worker persisted 40,000 keys', 120_000);
    expect(await cluster.stop(a)).toBe(0);

    const b = cluster.startWorker('b', { KFT_RESTORE_REPORT_EVERY_MS: '20' });
    const [running] = await cluster.untilRunningOn(1, 'the second worker recovered the partition');
    const owner = running!.owner!;
    expect(running!.lastRecovery).toMatchObject({ fromMemory: false, keys: 40_000 });

    const client = await cluster.temporal();
    const history = await client.workflow.getHandle(partitionWorkflowId({ flow: cluster.names.name, topic: cluster.names.topic, partition: 0 })).fetchHistory();
    const reports = (history.events ?? []).flatMap((e) => {
      const s = e.workflowExecutionSignaledEventAttributes;
      if (s?.signalName !== 'restoring') return [];
      return [JSON.parse(Buffer.from(s.input!.payloads![0]!.data!).toString('utf8')) as RestoringSignal];
    });
    const fromB = reports.filter((r) => r.generation === owner.generation && r.memberId === owner.memberId);
    expect(fromB.length).toBeGreaterThanOrEqual(1);
    for (const r of fromB) {
      expect(r.unit).toBe('snapshot records');
      expect(r.read).toBeGreaterThan(0);
      expect(r.read).toBeLessThanOrEqual(40_000);
      expect(r.fraction).toBeGreaterThan(0);
      expect(r.fraction).toBeLessThanOrEqual(1);
    }
    const shares = fromB.map((r) => r.fraction!);
    expect(shares).toEqual([...shares].sort((x, y) => x - y));
    await eventually('b still runs it', async () => ((await cluster.runningOn(1)) ? true : undefined));
    expect(await cluster.stop(b)).toBe(0);
  } finally {
    await cluster.close();
  }
}, 300_000);
