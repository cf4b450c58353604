import { FlowCluster } from './harness';

// The idle flush (docs/design.md, "Idle flush"): a burst folded to the log end is persisted and committed at
// once, not at the next persistEvery. persistEvery is 30 s here: without the idle flush the first
// commit comes 30 s after the first batch (and the keys created a little later, 30 s after that).
test('a burst folded to the log end is written and committed at once, well before persistEvery (30 s)', async () => {
  const cluster = new FlowCluster(3, { persistEveryMs: 30_000 });
  try {
    await cluster.start();
    const a = cluster.startWorker('a');
    await cluster.untilRunningOn(1, 'a runs all 3 partitions');
    await cluster.produce(3000);
    const produced = Date.now();
    await cluster.untilCaughtUp('committed at the log end', 12_000);
    const tail = Date.now() - produced;
    // Every key is written, not only the offset committed: the snapshots equal a plain fold of the
    // input while the worker still runs (no flush on stop has happened).
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(3000);
    expect(await cluster.persisted()).toEqual(reference);
    expect(tail).toBeLessThan(12_000);
    expect(await cluster.stop(a)).toBe(0);
  } finally {
    await cluster.close();
  }
}, 180_000);
