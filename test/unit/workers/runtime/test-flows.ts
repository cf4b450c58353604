import { defineFlow } from '../../../../index';

// The counting flows the runtime's unit tests run: a total per key of the records' `n`.

/** Persists every millisecond (the cadence's timer fires at once). */
export const counts = defineFlow<number, { n: number }>({
  name: 'counts',
  groupId: 'counts',
  topics: ['t'],
  fold: (s, r) => (s ?? 0) + r.value.n,
  timers: { persistPeriodically: { fireEvery: 1, persistEvery: 1 } },
}) as never;

/** Persists every second, no idle flush. */
export const persistingEverySecond = defineFlow<number, { n: number }>({
  name: 'counts',
  groupId: 'counts',
  topics: ['t'],
  fold: (s, r) => (s ?? 0) + r.value.n,
  timers: { persistPeriodically: { fireEvery: 1_000, persistEvery: 1_000 } },
  idleFlush: false,
}) as never;

/** Persists only on a revoke (its periodic persist a minute away), no idle flush. */
export const flushingOnRevoke = defineFlow<number, { n: number }>({
  name: 'counts',
  groupId: 'counts',
  topics: ['t'],
  fold: (s, r) => (s ?? 0) + r.value.n,
  timers: { persistPeriodically: { fireEvery: 60_000, persistEvery: 60_000, flushOnRevoke: true } },
  idleFlush: false,
}) as never;
