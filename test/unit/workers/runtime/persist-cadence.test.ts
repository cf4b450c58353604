import { PersistCadence } from '../../../../workers/runtime/persist-cadence';

// When one partition persists in its owning process: the periodic cadence (persistEvery, anchored at
// the first batch after a recovery) and the idle flush (caught up, then quiet). Jest's fake timers
// drive both; `persist` records what ran and when (the cadence's own clock).
describe('PersistCadence', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  function cadence(o: { everyMs?: number; idleAfterMs?: number; persistMs?: number; may?: () => boolean; now?: () => number; commitFirstBatch?: boolean } = {}) {
    const runs: Array<{ reason: 'periodic' | 'idle' | 'takeover'; at: number }> = [];
    const c = new PersistCadence({
      everyMs: o.everyMs ?? 1000,
      idleAfterMs: o.idleAfterMs,
      commitFirstBatch: o.commitFirstBatch,
      mayPersist: o.may ?? (() => true),
      now: o.now,
      persist: (reason, now) => {
        runs.push({ reason, at: now - 1_000_000 });
        return new Promise((resolve) => setTimeout(resolve, o.persistMs ?? 0));
      },
    });
    return { c, runs };
  }

  test('the first periodic persist is everyMs after the first batch folded, then every everyMs after the previous one started', async () => {
    const { c, runs } = cadence({ persistMs: 300 });
    c.start();
    await jest.advanceTimersByTimeAsync(200);
    c.folded(10, 100); // the first batch, 200 ms after the fold loop started: the cadence starts here
    await jest.advanceTimersByTimeAsync(3_100);
    expect(runs).toEqual([
      { reason: 'periodic', at: 1200 },
      { reason: 'periodic', at: 2200 },
      { reason: 'periodic', at: 3200 },
    ]);
    expect(c.lastPeriodicAt).toBe(1_003_200);
    // A later fold loop (continue-as-new, the in-memory shortcut) goes on from the last one: no re-anchoring.
    c.stop();
    c.start();
    c.folded(20, 100);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs.at(-1)).toEqual({ reason: 'periodic', at: 4200 });
  });

  test('a recovered engine (commitFirstBatch) commits its first batch at once, then every everyMs from that persist', async () => {
    const { c, runs } = cadence({ commitFirstBatch: true, persistMs: 50 });
    c.start();
    await jest.advanceTimersByTimeAsync(200);
    expect(runs).toEqual([]); // nothing folded yet: nothing to commit
    c.folded(10, 100);
    expect(runs).toEqual([{ reason: 'takeover', at: 200 }]);
    const due = c.due(); // a report meanwhile waits for it
    expect(due).toBeDefined();
    c.folded(20, 100); // later batches do not start another
    await jest.advanceTimersByTimeAsync(2_100);
    expect(runs).toEqual([
      { reason: 'takeover', at: 200 },
      { reason: 'periodic', at: 1200 },
      { reason: 'periodic', at: 2200 },
    ]);
    // Once only: a later fold loop on the same engine (continue-as-new, the in-memory shortcut) goes on periodically.
    c.stop();
    c.start();
    c.folded(30, 100);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs.filter((r) => r.reason === 'takeover')).toHaveLength(1);
    expect(runs.at(-1)).toEqual({ reason: 'periodic', at: 3200 });
  });

  test('commitFirstBatch waits for a partition it may persist: one that may not (revoked, stopping) starts the periodic cadence only', async () => {
    let may = false;
    const { c, runs } = cadence({ commitFirstBatch: true, may: () => may });
    c.start();
    c.folded(10, 100);
    expect(runs).toEqual([]);
    may = true;
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toEqual([{ reason: 'periodic', at: 1000 }]);
  });

  test('a timer that fires before its time by the wall clock still persists as of its time (the keys due then are due)', async () => {
    let behind = 0; // how far the wall clock reads behind the timer's schedule
    const { c, runs } = cadence({ now: () => Date.now() - behind });
    c.start();
    c.folded(10, 100); // its keys are due 1,000 ms from now
    behind = 7; // Node started the timer from the event loop's cached time, 7 ms stale
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toEqual([{ reason: 'periodic', at: 1000 }]); // not at 993, finding those keys not due yet
    behind = 0;
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs.at(-1)).toEqual({ reason: 'periodic', at: 2000 });
  });

  test('a persist longer than everyMs: the next one starts as soon as it ends', async () => {
    const { c, runs } = cadence({ persistMs: 2_500 });
    c.start();
    c.folded(1, 100);
    await jest.advanceTimersByTimeAsync(4_000);
    expect(runs).toHaveLength(2);
    expect(runs[0]!.at).toBe(1000);
    expect(runs[1]!.at - 3500).toBeGreaterThanOrEqual(0);
    expect(runs[1]!.at - 3500).toBeLessThanOrEqual(1); // a timer of 0 ms runs after 1 ms
  });

  test('due(): the persist running, or the one its timer is about to start (never one of its own); none before', async () => {
    const { c, runs } = cadence({ persistMs: 100 });
    c.start();
    c.folded(1, 100);
    expect(c.due()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(999);
    expect(c.due()).toBeUndefined();
    jest.setSystemTime(1_001_000); // due, its timer not run yet
    let reported = false;
    void c.due()!.then(() => (reported = true));
    expect(runs).toEqual([]); // a report does not start it
    await jest.advanceTimersByTimeAsync(1); // the timer starts it
    expect(runs).toEqual([{ reason: 'periodic', at: 1001 }]);
    expect(c.due()).toBeDefined(); // the run in flight
    expect(reported).toBe(false);
    await jest.advanceTimersByTimeAsync(100);
    expect(reported).toBe(true); // once the timer's persist ended
    expect(runs).toHaveLength(1);
  });

  test('stop() and a partition that may not be persisted here: no more periodic persists', async () => {
    let may = true;
    const { c, runs } = cadence({ may: () => may });
    c.start();
    c.folded(1, 100);
    await jest.advanceTimersByTimeAsync(1_000);
    may = false;
    await jest.advanceTimersByTimeAsync(3_000);
    expect(runs).toHaveLength(1);
    may = true;
    c.stop();
    await jest.advanceTimersByTimeAsync(3_000);
    expect(runs).toHaveLength(1);
    expect(c.due()).toBeUndefined();
  });

  test('a timer that finds the partition not persistable stops re-arming until a new fold loop starts it again (a report never does)', async () => {
    let may = false;
    const { c, runs } = cadence({ may: () => may });
    c.start();
    c.folded(1, 100);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(runs).toHaveLength(0); // the timer fired once, persisted nothing, did not re-arm
    may = true;
    await jest.advanceTimersByTimeAsync(5_000);
    expect(runs).toHaveLength(0); // nothing re-armed it by itself
    expect(c.due()).toBeUndefined(); // nor does the workflow's report
    // A new fold loop: start() re-arms from the last periodic persist (none: from now).
    c.start();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toEqual([{ reason: 'periodic', at: 11_000 }]);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(runs.map((r) => r.at)).toEqual([11_000, 12_000, 13_000]);

    // The same stall once it has persisted: start() goes on from the last periodic persist.
    may = false;
    await jest.advanceTimersByTimeAsync(3_000);
    expect(runs).toHaveLength(3);
    may = true;
    c.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(runs.at(-1)).toEqual({ reason: 'periodic', at: 16_000 }); // overdue since 14,000: at once
    c.stop();
  });

  test('idle flush: caught up and then quiet for idleAfterMs; each batch restarts the wait; behind the log end or off, none', async () => {
    const { c, runs } = cadence({ everyMs: 60_000, idleAfterMs: 250 });
    c.start();
    c.folded(50, 100); // behind
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toEqual([]);
    c.folded(100, 100); // caught up
    await jest.advanceTimersByTimeAsync(200);
    c.folded(101, 101); // more came: the quiet time starts again
    await jest.advanceTimersByTimeAsync(200);
    expect(runs).toEqual([]);
    await jest.advanceTimersByTimeAsync(50);
    expect(runs).toEqual([{ reason: 'idle', at: 1450 }]);
    c.folded(150, 200); // behind again: nothing
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toHaveLength(1);

    const off = cadence({ everyMs: 60_000 });
    off.c.start();
    off.c.folded(100, 100);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(off.runs).toEqual([]);
    c.stop();
    off.c.stop();
  });

  test("idle flush: the quiet time counts from the last record's timestamp when that is earlier, at most once per idleAfterMs", async () => {
    const { c, runs } = cadence({ everyMs: 60_000, idleAfterMs: 250 });
    c.start();
    const stamp = (agoMs: number) => String(Date.now() - agoMs);
    // A backlog read up to a log end quiet for a second already: flushed at once.
    c.folded(100, 100, stamp(1_000));
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toEqual([{ reason: 'idle', at: 0 }]);
    // Another quiet log end 100 ms later: not before idleAfterMs past the previous idle flush.
    await jest.advanceTimersByTimeAsync(99);
    c.folded(110, 110, stamp(5_000));
    await jest.advanceTimersByTimeAsync(149);
    expect(runs).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs.at(-1)).toEqual({ reason: 'idle', at: 250 });
    // A record appended 100 ms ago: 150 ms more; each batch still restarts the wait.
    await jest.advanceTimersByTimeAsync(1_000);
    c.folded(120, 120, stamp(100));
    await jest.advanceTimersByTimeAsync(149);
    expect(runs).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs.at(-1)).toEqual({ reason: 'idle', at: 1_400 });
    // Fresh, stamped in the future, or not a number: the whole idleAfterMs, as without a timestamp.
    for (const ts of [() => stamp(0), () => stamp(-10_000), () => 'not a timestamp']) {
      await jest.advanceTimersByTimeAsync(1_000);
      const before = runs.length;
      const at = Date.now() - 1_000_000;
      c.folded(130, 130, ts());
      await jest.advanceTimersByTimeAsync(249);
      expect(runs).toHaveLength(before);
      await jest.advanceTimersByTimeAsync(1);
      expect(runs.at(-1)).toEqual({ reason: 'idle', at: at + 250 });
    }
    // Behind the log end an old record changes nothing: no idle flush.
    const count = runs.length;
    c.folded(150, 200, stamp(10_000));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runs).toHaveLength(count);
    c.stop();
  });
});
