import { readFileSync } from 'node:fs';
import { FailureTypes } from '../../../activities/types';
import { eventually, FlowCluster, type SnapshotRecord, type Worker } from './harness';

// The stale owner of kafka-flow #732, for real: a worker process frozen with SIGSTOP past its
// session timeout while it holds folded but unpersisted records, the survivor takes over and
// persists newer state, then the frozen one is resumed with its old state and generation. Records
// arrive every 50 ms up to the freeze (so no idle flush runs): it holds their keys unpersisted. Its
// persist cadence (10 s) is shorter than the freeze (the session timeout, the survivor's take-over
// and catch-up), so waking, its periodic persist is overdue: its timer fires before anything comes
// back from the network, and it writes those keys under the old generation — and the broker
// refuses the write (the fence): the test requires a fenced persist that carried keys. What a
// learns on waking can still come first (Temporal cancelled its fold loop, kafkajs's heartbeat says
// the member is gone): then it drops the partitions unwritten — safe, but proving nothing — and the
// test freezes it again once it is back, up to three times. Nothing it wrote may land in the
// snapshot topic, and the final state is exactly the plain fold of the input.

interface Line {
  time: number;
  msg: string;
  level: number;
  partition?: number;
  written?: number;
  err?: { code?: string; type?: string; message?: string };
  error?: { type?: string };
  [k: string]: unknown;
}

const lines = (cluster: FlowCluster, w: Worker): Line[] => cluster.logLines<Line>(w);
/** The process's state letter from /proc (R running, S sleeping, T stopped, Z zombie), or why not. */
const processState = (pid: number | undefined): string => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[0] ?? '?';
  } catch (err) {
    return `unreadable (${(err as Error).message})`;
  }
};

/** A write the broker refused: the persistence's fence line, a fenced error (code FENCED) on a flush, or an activity's fenced failure. */
const isFence = (l: Line): boolean =>
  /fenced/i.test(l.msg) || l.err?.code === 'FENCED' || l.err?.type === 'SnapshotWriteFencedError' || l.error?.type === FailureTypes.fenced;

const brief = (l: Line) => JSON.stringify({ t: l.time, msg: l.msg, partition: l.partition, err: l.err?.message ?? l.error?.type }).slice(0, 300);

test('SIGSTOP a worker past its session timeout, let the survivor take over, SIGCONT it: it is fenced', async () => {
  const cluster = new FlowCluster(4, { sessionTimeoutMs: 6000, persistEveryMs: 500 });
  try {
    await cluster.start();
    await cluster.produce(2000);
    // a persists every 10 s (or once caught up and quiet for 5 s: the idle flush), so it holds the
    // records folded while they keep arriving unpersisted (b, the survivor, persists every 500 ms).
    // With the default quiet time (250 ms) a gap in the feeding below under load let a's idle flush
    // land everything just before the freeze, and a woke with nothing to write.
    const a = cluster.startWorker('a', { LOG_LEVEL: 'debug', TEST_PERSIST_EVERY_MS: '10000', TEST_IDLE_FLUSH: '5000' });
    const b = cluster.startWorker('b');
    await cluster.untilRunningOn(2, 'a and b share the partitions', 120_000);
    await cluster.produce(1000);
    await cluster.untilCaughtUp('caught up');

    /**
     * One freeze: records keep arriving right up to it (a has folded some and not persisted them);
     * b takes everything over and catches up; a, frozen longer than its persist cadence, wakes.
     * Its overdue persist usually writes first and is refused; but when what Temporal or the group
     * tell it on waking (its fold loop cancelled, its member gone) is handled first, a drops its
     * partitions without writing — safe, but it proves nothing: then, once a is back, again.
     */
    const freezeAndWake = async () => {
      let feeding = true;
      const feeder = (async () => {
        while (feeding) {
          await cluster.produce(20);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      await new Promise((r) => setTimeout(r, 2000));
      const frozenAt = Date.now();
      a.process.kill('SIGSTOP');
      feeding = false;
      await feeder;

      const stopped = await eventually(
        'b runs all 4 partitions and caught up',
        async () => {
          const rows = await cluster.runningOn(1);
          return rows && (await cluster.caughtUp()) ? rows : undefined;
        },
        120_000,
        () => cluster.describeLag(),
      );
      expect(stopped.length).toBe(4);
      await cluster.produce(1000);
      await cluster.untilCaughtUp('b caught up with the new records');
      // Everything is persisted (committed == end) and no input arrives: from here on, nobody has
      // anything to write. Whatever lands in the snapshot topic after a wakes is a's stale write.
      // Frozen longer than a's persist cadence: its periodic persist is overdue when it wakes.
      const frozenFor = Date.now() - frozenAt;
      if (frozenFor < 12_000) await new Promise((r) => setTimeout(r, 12_000 - frozenFor));
      const before = await Promise.all([0, 1, 2, 3].map((p) => cluster.snapshotRecords(p)));
      const persistedBefore = await cluster.persisted();
      // It really was frozen: nothing logged from a second after SIGSTOP until now.
      const wokeAt = Date.now();
      expect(lines(cluster, a).filter((l) => l.time > frozenAt + 1000 && l.time < wokeAt).map(brief)).toEqual([]);
      a.process.kill('SIGCONT'); // a wakes up believing it still owns its partitions
      // It writes the keys it had folded and the broker refuses the write: a fenced persist that
      // carried keys (a persist that only committed an offset would prove nothing) — or, having
      // learned first that it owns nothing, it rejoins without writing.
      const woke = await eventually(
        "a's stale write of the keys it held refused by the broker, or a back in the group without writing",
        async () => {
          const since = lines(cluster, a).filter((l) => l.time >= wokeAt);
          const fenced = since.filter((l) => l.msg === 'persist fenced: partition stopped' && typeof l.keys === 'number' && l.keys > 0);
          if (fenced.length > 0) return { fenced, fences: since.filter(isFence) };
          const rejoined = since.some((l) => l.msg === 'partitions assigned') && (await cluster.runningOn(2)) !== undefined;
          return rejoined && since.filter((l) => l.msg === 'persisted').length > 0 ? { fenced: [], fences: [] } : undefined;
        },
        60_000,
        () =>
          `a's lines since it woke: ${lines(cluster, a).filter((l) => l.time >= wokeAt).map(brief).join(' | ')}; ` +
          `its process: ${processState(a.process.pid)} (exit code ${a.process.exitCode}, signal ${a.process.signalCode}); ` +
          `its last lines: ${lines(cluster, a).slice(-8).map((l) => `${l.time - wokeAt} ms ${brief(l)}`).join(' | ')}; ` +
          `its output that is not a log line: ${cluster.log(a).split('\n').filter((l) => l.trim() && !l.startsWith('{')).slice(-15).join(' / ')}`,
      );
      return { woke, wokeAt, before, persistedBefore };
    };
    let cycle = await freezeAndWake();
    for (let attempt = 2; cycle.woke.fenced.length === 0 && attempt <= 3; attempt++) {
      process.stderr.write(`stale owner: a woke and rejoined without writing (freeze ${attempt - 1}); freezing it again\n`);
      await cluster.untilRunningOn(2, 'a rejoined: a and b share the partitions again', 120_000);
      await cluster.untilCaughtUp('caught up after a rejoined');
      cycle = await freezeAndWake();
    }
    const { woke, wokeAt, before, persistedBefore } = cycle;
    expect(woke.fenced.length).toBeGreaterThan(0);
    // a rejoins and gets partitions again as a new owner (full recovery from b's state).
    await cluster.untilRunningOn(2, 'a rejoined: a and b share the partitions again', 120_000);
    await cluster.untilCaughtUp('caught up after a rejoined');
    process.stderr.write(
      `stale owner: ${woke.fenced.length} fenced persist(s) carrying ${woke.fenced.map((l) => l.keys).join(', ')} key(s); ` +
        `${woke.fences.length} fence line(s) after waking: ${woke.fences.map(brief).join(' | ')}\n`,
    );

    // Nothing a wrote after waking landed: the committed content of every snapshot partition is
    // exactly what it was before (no input arrived, so no owner had anything new to write). A
    // record a wrote that landed would show here, and with a last-folded offset at or below b's.
    for (const p of [0, 1, 2, 3]) {
      const after = await cluster.snapshotRecords(p);
      const was = before[p]!;
      expect(after.records.slice(0, was.records.length)).toEqual(was.records);
      const lastOf = new Map<string, SnapshotRecord>(was.records.map((r) => [r.key, r]));
      const landed = after.records.slice(was.records.length).map((r) => ({
        snapshotPartition: p,
        offset: r.offset,
        key: r.key,
        lastFolded: r.snapshot?.offset,
        survivorsLastFolded: lastOf.get(r.key)?.snapshot?.offset,
      }));
      expect(landed).toEqual([]);
      if (BigInt(after.logEnd) > BigInt(was.logEnd)) {
        process.stderr.write(`stale owner: snapshot partition ${p}: log end ${was.logEnd} → ${after.logEnd}, nothing committed (aborted)\n`);
      }
    }
    expect(await cluster.persisted()).toEqual(persistedBefore);
    // a never reported a write that landed between waking and getting partitions again.
    const reassigned = lines(cluster, a).find((l) => l.time >= wokeAt && l.msg === 'partitions assigned')?.time ?? Number.POSITIVE_INFINITY;
    const claimed = lines(cluster, a).filter((l) => l.time >= wokeAt && l.time < reassigned && l.msg === 'persisted' && (l.written ?? 0) > 0);
    expect(claimed.map(brief)).toEqual([]);

    await cluster.produce(500);
    await cluster.untilCaughtUp('caught up at the end');
    await cluster.stop(a);
    await cluster.stop(b);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(cluster.producedCount);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 700_000);
