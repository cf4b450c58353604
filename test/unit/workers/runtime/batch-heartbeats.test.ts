import { heartbeatDuring } from '../../../../workers/runtime/batch-heartbeats';

// Pure timing logic, on jest's fake timers; the real consumer's behaviour is covered by
// test/integration/orchestration/cassandra-slow-persist.test.ts.
describe('heartbeatDuring (a batch callback that waits keeps heartbeating)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const deferred = <T>() => {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };

  it('heartbeats every interval while the work waits, and no more once it settled', async () => {
    const heartbeat = jest.fn(() => Promise.resolve());
    const work = deferred<boolean>();
    const waiting = heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 60_000 }, work.promise);
    await jest.advanceTimersByTimeAsync(2_600);
    expect(heartbeat).toHaveBeenCalledTimes(5);
    work.resolve(true);
    await expect(waiting).resolves.toBe(true);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(heartbeat).toHaveBeenCalledTimes(5);
  });

  it('sends no heartbeat for work that settles within the interval', async () => {
    const heartbeat = jest.fn(() => Promise.resolve());
    await expect(heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 60_000 }, Promise.resolve(false))).resolves.toBe(false);
    expect(heartbeat).not.toHaveBeenCalled();
  });

  it('does not overlap heartbeats: one still in flight skips the next tick', async () => {
    const answers: Array<() => void> = [];
    const heartbeat = jest.fn(() => new Promise<void>((r) => answers.push(r)));
    const work = deferred<boolean>();
    const waiting = heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 60_000 }, work.promise);
    await jest.advanceTimersByTimeAsync(1_600);
    expect(heartbeat).toHaveBeenCalledTimes(1);
    answers[0]!();
    await jest.advanceTimersByTimeAsync(500);
    expect(heartbeat).toHaveBeenCalledTimes(2);
    work.resolve(true);
    await waiting;
  });

  it('a failed heartbeat ends the heartbeats and is thrown once the work settled (kafkajs then rejoins)', async () => {
    const rebalancing = Object.assign(new Error('The group is rebalancing'), { type: 'REBALANCE_IN_PROGRESS' });
    const heartbeat = jest.fn(() => Promise.reject(rebalancing));
    const work = deferred<boolean>();
    const waiting = heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 60_000 }, work.promise);
    const outcome = waiting.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    await jest.advanceTimersByTimeAsync(3_000);
    expect(heartbeat).toHaveBeenCalledTimes(1);
    let settled = false;
    void outcome.then(() => {
      settled = true;
    });
    await jest.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false); // the work still runs: the batch is not abandoned half folded
    work.resolve(true);
    expect(await outcome).toBe(rebalancing);
  });

  it("the work's own error wins over a heartbeat's", async () => {
    const heartbeat = jest.fn(() => Promise.reject(new Error('unknown member')));
    const work = deferred<boolean>();
    const waiting = heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 60_000 }, work.promise);
    const outcome = waiting.catch((e: unknown) => e);
    await jest.advanceTimersByTimeAsync(600);
    const foldFailed = new Error('fold failed');
    work.reject(foldFailed);
    expect(await outcome).toBe(foldFailed);
  });

  it('stops heartbeating past maxMs and says so once: a fold stuck for good loses the member, as with the Java consumer\'s max.poll.interval.ms', async () => {
    const heartbeat = jest.fn(() => Promise.resolve());
    const onGiveUp = jest.fn();
    const work = deferred<boolean>();
    const waiting = heartbeatDuring(heartbeat, { everyMs: 500, maxMs: 2_000, onGiveUp }, work.promise);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(heartbeat).toHaveBeenCalledTimes(4);
    expect(onGiveUp).toHaveBeenCalledTimes(1);
    expect(onGiveUp.mock.calls[0]![0]).toBeGreaterThan(2_000);
    work.resolve(true);
    await expect(waiting).resolves.toBe(true);
  });
});
