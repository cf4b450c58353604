import { FlowCluster, type Worker } from './harness';

type Timed = { msg?: string; time: number; workflows?: number };

/** How many times `w` was assigned partitions so far. */
const joins = (cluster: FlowCluster, w: Worker) => cluster.logLines<Timed>(w).filter((l) => l.msg === 'partitions assigned').length;

/** A graceful stop of `stopped`, from its log: its workflows handling the revoke, its workflow worker stopping; and `taker`'s next assignment after `joinsBefore`. */
function stopTimeline(cluster: FlowCluster, stopped: Worker, taker: Worker, joinsBefore: number) {
  const lines = cluster.logLines<Timed>(stopped);
  return {
    handled: lines.find((l) => l.msg === 'the partition workflows handled the revoke'),
    workflowWorkerStopped: lines.find((l) => l.msg?.startsWith('workflow worker ') && l.msg.includes(': stopping it')),
    left: lines.find((l) => l.msg === 'left the group'),
    took: cluster.logLines<Timed>(taker).filter((l) => l.msg === 'partitions assigned')[joinsBefore],
  };
}

// Real worker processes, real Kafka (transactional snapshots) and Temporal: partitions move from
// one worker to two and back to one, and the persisted state is exactly a plain fold of the input.
// Eager rebalancing (KFT_REBALANCE=eager): every partition is revoked and assigned at each step.
// Without folding at the join (KFT_FOLD_AT_JOIN=0), whose graceful stop stops its workflow worker
// before the member leaves the group.
test('eager: assignment → recovery → processing → a second worker joins → partitions move → state continues exactly', async () => {
  // Short histories: partition workflows continue as new several times during the test, each time
  // handing the running partition to a new fold loop while the old one learns of its cancellation.
  const cluster = new FlowCluster(4, { env: { KFT_MAX_HISTORY_EVENTS: '60', KFT_REBALANCE: 'eager', KFT_FOLD_AT_JOIN: '0' } });
  try {
    await cluster.start();
    await cluster.produce(2000);
    const a = cluster.startWorker('a');
    const alone = await cluster.untilRunningOn(1, 'worker a runs all 4 partitions');
    expect(alone.every((p) => p.counters.recoveries >= 1)).toBe(true);
    await cluster.untilCaughtUp('a caught up');

    const b = cluster.startWorker('b');
    const shared = await cluster.untilRunningOn(2, 'a and b share the partitions');
    expect(shared.every((p) => p.owner && p.owner.generation >= 2)).toBe(true);
    await cluster.produce(2000);
    await cluster.untilCaughtUp('caught up after the rebalance');

    const bJoins = joins(cluster, b);
    expect(await cluster.stop(a)).toBe(0); // graceful: flush, commit, leave
    await cluster.untilRunningOn(1, 'b runs all 4 partitions');
    // a stopped its workflow worker before it left the group, so b's signals for the partitions it
    // took could not reach a workflow worker that was shutting down (workers/runtime/quiet-shutdown.ts).
    const { handled, workflowWorkerStopped, left, took: bTook } = stopTimeline(cluster, a, b, bJoins);
    expect(handled?.workflows).toBeGreaterThan(0);
    expect(workflowWorkerStopped!.time).toBeLessThanOrEqual(left!.time);
    expect(workflowWorkerStopped).toBeDefined();
    expect(bTook).toBeDefined();
    expect(handled!.time).toBeLessThanOrEqual(workflowWorkerStopped!.time);
    expect(workflowWorkerStopped!.time).toBeLessThanOrEqual(bTook!.time);
    await cluster.produce(1000);
    await cluster.untilCaughtUp('caught up on b alone');
    const continued = await cluster.status();
    expect(continued.some((p) => p.counters.runs >= 2)).toBe(true);
    // Every partition still running on b. Polled: the status lists the running executions by the
    // server's visibility, which shows a run that just continued as new a moment after the old one closed.
    await cluster.untilRunningOn(1, 'every partition still running on b', 30_000);
    expect(await cluster.stop(b)).toBe(0);

    // Graceful shutdown leaves committed offset == persisted state: nothing held back.
    expect(await cluster.caughtUp()).toBe(true);
    const reference = await cluster.reference();
    expect(reference.size).toBe(50);
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(5000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);

// The same move with cooperative rebalancing (the default): the partitions that stay with worker a
// are never revoked — their workflows keep the owner generation and the recovery count they had,
// the fold goes on without a new recovery — and the state is still exact.
test('cooperative: a second worker joins → only the partitions that move stop; the others keep their owner and generation → state continues exactly', async () => {
  const cluster = new FlowCluster(4, { env: { KFT_MAX_HISTORY_EVENTS: '60' } });
  try {
    await cluster.start();
    await cluster.produce(2000);
    const a = cluster.startWorker('a');
    const alone = await cluster.untilRunningOn(1, 'worker a runs all 4 partitions');
    await cluster.untilCaughtUp('a caught up');
    const before = new Map(alone.map((p) => [p.partition, p]));

    const b = cluster.startWorker('b');
    const shared = await cluster.untilRunningOn(2, 'a and b share the partitions');
    const onA = shared.filter((p) => p.owner!.taskQueue === before.get(p.partition)!.owner!.taskQueue);
    const onB = shared.filter((p) => p.owner!.taskQueue !== before.get(p.partition)!.owner!.taskQueue);
    expect(onA).toHaveLength(2);
    expect(onB).toHaveLength(2);
    for (const p of onA) {
      // Kept: the same ownership generation, no recovery from the store, no fence. A run continued
      // as new meanwhile (KFT_MAX_HISTORY_EVENTS is small here) takes the engine over in memory:
      // counted as a recovery, one per new run, from memory.
      const was = before.get(p.partition)!;
      expect(p.owner!.generation).toBe(was.owner!.generation);
      const recoveries = p.counters.recoveries - was.counters.recoveries;
      expect(recoveries).toBeLessThanOrEqual(p.counters.runs - was.counters.runs);
      if (recoveries > 0) expect(p.lastRecovery?.fromMemory).toBe(true);
      expect(p.counters.fences).toBe(0);
    }
    for (const p of onB) expect(p.owner!.generation).toBeGreaterThan(before.get(p.partition)!.owner!.generation);
    // Worker a revoked only what moved.
    type Line = { msg?: string; generation?: number; assignment?: Record<string, number[]> };
    expect(cluster.logLines<Line>(a).filter((l) => l.msg === 'flush on revoke did not land')).toEqual([]);

    await cluster.produce(2000);
    await cluster.untilCaughtUp('caught up after the rebalance');
    const aJoins = joins(cluster, a);
    expect(await cluster.stop(b)).toBe(0);
    await cluster.untilRunningOn(1, 'a runs all 4 partitions again');
    // Folding at the join (the default), b left the group first — so a could take its partitions up
    // and fold them at once — and stopped its workflow worker once its workflows had handled the revoke.
    const { handled, workflowWorkerStopped, left, took: aTook } = stopTimeline(cluster, b, a, aJoins);
    expect(handled?.workflows).toBe(2);
    expect(workflowWorkerStopped).toBeDefined();
    expect(left).toBeDefined();
    expect(aTook).toBeDefined();
    expect(left!.time).toBeLessThanOrEqual(handled!.time);
    expect(left!.time).toBeLessThanOrEqual(workflowWorkerStopped!.time);
    await cluster.produce(1000);
    await cluster.untilCaughtUp('caught up on a alone');
    const last = await cluster.status();
    expect(last.every((p) => p.counters.fences === 0)).toBe(true);
    expect(await cluster.stop(a)).toBe(0);

    expect(await cluster.caughtUp()).toBe(true);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(5000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);

// A rolling upgrade from an eager-only version: worker a rebalances eagerly (KFT_REBALANCE=eager:
// kafkajs's round robin only), b is cooperative (its protocol first, the eager ones after it), so
// the group runs eager while a is in it; once a leaves, b's next join is cooperative — and b, having
// given everything up before that join (eager), must take every partition up again (nothing was
// kept through it). State exact throughout.
test('rolling upgrade: an eager-only worker and a cooperative one share the group (eager), then the cooperative one alone takes every partition up again', async () => {
  const cluster = new FlowCluster(4);
  try {
    await cluster.start();
    await cluster.produce(1000);
    const a = cluster.startWorker('a', { KFT_REBALANCE: 'eager' });
    await cluster.untilRunningOn(1, 'the eager-only worker runs all 4 partitions');
    const b = cluster.startWorker('b');
    await cluster.untilRunningOn(2, 'a and b share the partitions (the group runs eager)');
    type Line = { msg?: string; assignment?: Record<string, number[]> };
    await cluster.produce(1000);
    await cluster.untilCaughtUp('caught up with both');
    expect(await cluster.stop(a)).toBe(0);
    await cluster.untilRunningOn(1, 'b runs all 4 partitions after a left (its first cooperative join)');
    await cluster.produce(1000);
    await cluster.untilCaughtUp('caught up on b alone');
    expect(cluster.logLines<Line>(b).filter((l) => l.msg === 'partitions assigned').length).toBeGreaterThanOrEqual(2);
    expect(await cluster.stop(b)).toBe(0);
    expect(await cluster.caughtUp()).toBe(true);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(3000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 400_000);
