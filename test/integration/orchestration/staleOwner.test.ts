import { eventually, FlowCluster } from './harness';

// The stale owner of kafka-flow #732, for real: a worker process frozen with SIGSTOP past its
// session timeout, the survivor takes over and persists newer state, then the frozen one is
// resumed with its old state and generation. It must write nothing: the final state is exactly
// the plain fold of the input.
test('SIGSTOP a worker past its session timeout, let the survivor take over, SIGCONT it: it is fenced', async () => {
  const cluster = new FlowCluster(4, { sessionTimeoutMs: 6000, persistEveryMs: 500 });
  try {
    await cluster.start();
    await cluster.produce(2000);
    const a = cluster.startWorker('a', { LOG_LEVEL: 'debug' });
    const b = cluster.startWorker('b');
    await eventually('a and b share the partitions', () => cluster.runningOn(2), 120_000);
    await cluster.produce(1000);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);
    await cluster.produce(500); // a folds some of these, then freezes with them unpersisted
    await new Promise((r) => setTimeout(r, 300));

    const frozenAt = Date.now();
    a.process.kill('SIGSTOP');
    const stopped = await eventually('b runs all 4 partitions', async () => {
      const rows = await cluster.runningOn(1);
      return rows && (await cluster.caughtUp()) ? rows : undefined;
    }, 120_000);
    await cluster.produce(1000);
    await eventually('b caught up with the new records', () => cluster.caughtUp(), 60_000);
    const before = await cluster.persisted();

    const wokeAt = Date.now();
    a.process.kill('SIGCONT'); // a wakes up believing it still owns its partitions
    await new Promise((r) => setTimeout(r, 8000));
    // Nothing a wrote after waking may land: b's newer state is intact and b still owns everything.
    expect(await cluster.persisted()).toEqual(before);
    const after = await eventually('settled', () => cluster.runningOn(), 60_000);
    expect(after.length).toBe(4);

    await cluster.produce(500);
    await eventually('caught up at the end', () => cluster.caughtUp(), 60_000);
    await cluster.stop(a);
    await cluster.stop(b);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(5000);
    expect(await cluster.persisted()).toEqual(reference);
    expect(stopped.length).toBe(4);
    // a's writes after waking were refused by the broker, not silently skipped.
    // From waking until it is assigned partitions again, nothing a persisted landed; whatever it
    // tried was refused (a fence), not silently skipped.
    type Line = { time: number; msg: string; level: number; partition?: number; written?: number; committed?: string };
    const all = cluster
      .log(a)
      .split('\n')
      .filter((l) => l.startsWith('{"level":'))
      .map((l) => JSON.parse(l) as Line);
    const lines = all.filter((l) => l.time >= wokeAt);
    const reassigned = lines.find((l) => l.msg === 'partitions assigned')?.time ?? Number.POSITIVE_INFINITY;
    const committedBefore = new Map<number, string | undefined>();
    for (const l of all) if (l.time < frozenAt && l.msg === 'persisted') committedBefore.set(l.partition!, l.committed);
    // A persist that found nothing to write is a no-op; anything else must not have landed.
    for (const l of lines.filter((x) => x.msg === 'persisted' && x.time < reassigned)) {
      expect({ partition: l.partition, written: l.written, committed: l.committed }).toEqual({
        partition: l.partition,
        written: 0,
        committed: committedBefore.get(l.partition!),
      });
    }
    const attempts = lines.filter((l) => l.time < reassigned && /fenced|FENCED|StaleGeneration|no longer holds/.test(JSON.stringify(l)));
    process.stderr.write(`stale owner: ${attempts.length} refused write attempt(s) after waking\n`);
  } finally {
    await cluster.close();
  }
}, 400_000);
