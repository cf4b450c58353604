import type { RestoreProgress } from '../../../../flow/ports';
import { reportRestore } from '../../../../workers/runtime/restore-reports';

const silent = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as never;

describe('reportRestore', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('a recovery shorter than the interval sends nothing; a longer one reports every interval, never the same report twice', async () => {
    let progress: RestoreProgress | undefined;
    const sent: RestoreProgress[] = [];
    const stop = reportRestore(() => progress, async (p) => void sent.push(p), 1000, silent);
    progress = { read: 10, unit: 'keys', fraction: 0.1 };
    await jest.advanceTimersByTimeAsync(999);
    expect(sent).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(sent).toEqual([{ read: 10, unit: 'keys', fraction: 0.1 }]);
    await jest.advanceTimersByTimeAsync(3000); // no progress since: nothing new
    expect(sent).toHaveLength(1);
    progress = { read: 20, unit: 'keys', fraction: 0.2 };
    await jest.advanceTimersByTimeAsync(1000);
    expect(sent.at(-1)).toEqual({ read: 20, unit: 'keys', fraction: 0.2 });
    stop();
    progress = { read: 30, unit: 'keys', fraction: 0.3 };
    await jest.advanceTimersByTimeAsync(5000);
    expect(sent).toHaveLength(2);
  });

  test('no report before the backend knows anything; a report still being sent holds back the next; a failed one is dropped', async () => {
    let progress: RestoreProgress | undefined;
    const sends: Array<() => void> = [];
    let failNext = false;
    const stop = reportRestore(
      () => progress,
      (p) =>
        new Promise<void>((resolve, reject) => {
          if (failNext) {
            failNext = false;
            reject(new Error('Temporal unreachable'));
            return;
          }
          sends.push(() => resolve());
          void p;
        }),
      100,
      silent,
    );
    await jest.advanceTimersByTimeAsync(300);
    expect(sends).toHaveLength(0);
    progress = { read: 1, unit: 'snapshot records', fraction: 0.01 };
    await jest.advanceTimersByTimeAsync(100);
    expect(sends).toHaveLength(1);
    progress = { read: 2, unit: 'snapshot records', fraction: 0.02 };
    await jest.advanceTimersByTimeAsync(500); // the first is still in flight
    expect(sends).toHaveLength(1);
    sends[0]!();
    failNext = true;
    await jest.advanceTimersByTimeAsync(100); // sent and failed
    progress = { read: 3, unit: 'snapshot records', fraction: 0.03 };
    await jest.advanceTimersByTimeAsync(100);
    expect(sends).toHaveLength(2);
    stop();
  });
});
