import { defineFlow } from '../../../../index';

// The counting flows the runtime's unit tests run: a total per key of the records' `n`.
const countsWith = (timers: { fireEvery: number; persistEvery: number; flushOnRevoke?: boolean }, idleFlush?: false) =>
  defineFlow<number, { n: number }>({
    name: 'counts',
    groupId: 'counts',
    topics: ['t'],
    fold: (s, r) => (s ?? 0) + r.value.n,
    timers: { persistPeriodically: timers },
    ...(idleFlush === false ? { idleFlush } : {}),
  }) as never;

/** Persists every millisecond (the cadence's timer fires at once). */
export const counts = countsWith({ fireEvery: 1, persistEvery: 1 });

/** Persists every second, no idle flush. */
export const persistingEverySecond = countsWith({ fireEvery: 1_000, persistEvery: 1_000 }, false);

/** Persists only on a revoke (its periodic persist a minute away), no idle flush. */
export const flushingOnRevoke = countsWith({ fireEvery: 60_000, persistEvery: 60_000, flushOnRevoke: true }, false);
