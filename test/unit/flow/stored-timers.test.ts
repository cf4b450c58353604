// Key timers of keys out of memory (a bounded state cache with onTimer / stateTtl): the engine
// over an in-memory FAKE of the local store's due-time lookup (`readDue` answered by scanning the
// in-memory backend's snapshots and their timers; the real one, the LMDB index, is tested in
// test/unit/persistence/kafka/local-state-due-index.test.ts and on real workers in
// test/integration/local-state/state-cache-timers.test.ts). Keys with pending timers leave memory;
// when their timers come due they are read back and fire exactly once — on the tick, when the
// watermark passes them, and after a restart that loaded no key.
import type { Fold, OnTimer } from '../../../flow/fold';
import { StateCache } from '../../../flow/state-cache';
import { TimerQueue } from '../../../flow/timer-queue';
import type { InputMessage } from '../../../flow/record';
import { InMemoryBackend } from '../../../persistence/memory';
import { harness, MINUTE, TP } from './harness';
import { onDemandWithFakeDueIndex } from './on-demand-fake';

interface Pinged {
  count: number;
  pings: number;
}

function timed(key: string, offset: number, timestamp: number): InputMessage {
  return { offset: String(offset), key: Buffer.from(key), value: Buffer.from('v'), timestamp: String(timestamp) };
}

const persistEveryMinute = { persistPeriodically: { fireEvery: 0, persistEvery: MINUTE } };
const ping: OnTimer<Pinged> = (state) => ({ ...state, pings: state.pings + 1 });

async function firedCount(metrics: { timersFired: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> } }, kind: 'timer' | 'ttl'): Promise<number> {
  return (await metrics.timersFired.get()).values.filter((v) => v.labels.kind === kind).reduce((n, v) => n + v.value, 0);
}

describe('timers of keys out of memory (in-memory fake of the store\'s due-time index)', () => {
  test('processing time: keys with timers leave memory; on the tick the due ones are read back and fire once', async () => {
    const backend = new InMemoryBackend<Pinged, string>();
    const start = Date.parse('2020-03-01T00:00:00.000Z');
    const fold: Fold<Pinged, string> = (state, _record, ctx) => {
      ctx.timers.at(start + 5 * MINUTE, { name: 'ping' });
      return { count: (state?.count ?? 0) + 1, pings: state?.pings ?? 0 };
    };
    const cache = new StateCache({ maxKeys: 10 });
    const h = await harness<Pinged>({ fold, backend, persistence: onDemandWithFakeDueIndex(backend), timers: persistEveryMinute, extra: { stateCache: cache, onTimer: ping } });
    await h.flow.handleBatch(Array.from({ length: 100 }, (_, i) => timed(`k${i}`, i, 0)));
    h.clock.advance(MINUTE);
    h.flow.triggerTimers();
    await h.flow.persist(h.clock.now(), 'periodic');
    // Pending timers no longer pin a key: the store finds them.
    expect(h.flow.liveKeys).toBeLessThanOrEqual(9);
    expect([...backend.snapshots.entries(TP).values()].every((s) => s.timers?.[0]?.name === 'ping')).toBe(true);

    h.clock.advance(3 * MINUTE);
    h.flow.triggerTimers();
    expect(await firedCount(h.metrics, 'timer')).toBe(0); // not due yet: nothing read back
    expect(h.flow.liveKeys).toBeLessThanOrEqual(9);

    h.clock.advance(MINUTE);
    h.flow.triggerTimers();
    expect(await firedCount(h.metrics, 'timer')).toBe(100);
    await h.flow.persist(h.clock.now(), 'periodic');
    for (const [key, s] of backend.snapshots.entries(TP)) expect([key, s.state, s.timers]).toEqual([key, { count: 1, pings: 1 }, undefined]);
    expect(h.flow.liveKeys).toBeLessThanOrEqual(9);
    h.clock.advance(MINUTE);
    h.flow.triggerTimers();
    expect(await firedCount(h.metrics, 'timer')).toBe(100);
  });

  test('event time: a record of another key passing an out-of-memory key\'s timer reads it back and fires it in that batch', async () => {
    const backend = new InMemoryBackend<Pinged, string>();
    const fold: Fold<Pinged, string> = (state, record, ctx) => {
      ctx.timers.at(Number(record.timestamp) + 1_000, { name: 'ping', time: 'event' });
      return { count: (state?.count ?? 0) + 1, pings: state?.pings ?? 0 };
    };
    const looks = { count: 0 };
    const h = await harness<Pinged>({ fold, backend, persistence: onDemandWithFakeDueIndex(backend, looks), timers: persistEveryMinute, extra: { stateCache: new StateCache({ maxKeys: 5 }), onTimer: ping } });
    await h.flow.handleBatch(Array.from({ length: 50 }, (_, i) => timed(`k${i}`, i, i)));
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.flow.liveKeys).toBeLessThanOrEqual(4);
    // Keys k0..k9 are due at 1,000..1,009: a record at 1,009 passes them.
    const before = looks.count;
    await h.flow.handleBatch([timed('other', 50, 1_009)]);
    expect(await firedCount(h.metrics, 'timer')).toBe(10);
    // The store is asked again only once the watermark passes the next due time it named.
    await h.flow.handleBatch([timed('other', 51, 1_009)]);
    expect(looks.count).toBe(before + 1);
    await h.flow.handleBatch([timed('other', 52, 2_000)]);
    expect(await firedCount(h.metrics, 'timer')).toBe(50);
    for (let i = 0; i < 50; i++) expect(h.flow.stateOf(`k${i}`)).toEqual({ count: 1, pings: 1 });
  });

  test('a restart loads no key, and the timers of keys never read again fire (stateTtl expires them)', async () => {
    const backend = new InMemoryBackend<Pinged, string>();
    const fold: Fold<Pinged, string> = (state) => ({ count: (state?.count ?? 0) + 1, pings: 0 });
    const options = { fold, backend, timers: persistEveryMinute };
    const first = await harness<Pinged>({ ...options, persistence: onDemandWithFakeDueIndex(backend), extra: { stateCache: new StateCache({ maxKeys: 5 }), stateTtl: { ms: 10 * MINUTE, time: 'processing' } } });
    await first.flow.handleBatch(Array.from({ length: 30 }, (_, i) => timed(`k${i}`, i, 0)));
    first.clock.advance(MINUTE);
    await first.flow.persist(first.clock.now(), 'periodic');
    expect(backend.snapshots.entries(TP).size).toBe(30);

    const again = await harness<Pinged>({
      ...options,
      clock: first.clock,
      assignedAt: 30,
      persistence: onDemandWithFakeDueIndex(backend),
      extra: { stateCache: new StateCache({ maxKeys: 5 }), stateTtl: { ms: 10 * MINUTE, time: 'processing' } },
    });
    expect(again.flow.liveKeys).toBe(0);
    again.clock.advance(10 * MINUTE);
    again.flow.triggerTimers();
    expect(await firedCount(again.metrics, 'ttl')).toBe(30);
    await again.flow.persist(again.clock.now(), 'periodic');
    // Deleted: a delete marker each, then purged once the commit has passed it.
    again.clock.advance(MINUTE);
    await again.flow.persist(again.clock.now(), 'periodic');
    expect(backend.snapshots.entries(TP).size).toBe(0);
    again.flow.triggerTimers();
    expect(await firedCount(again.metrics, 'ttl')).toBe(30);
  });
});

test('TimerQueue.retain keeps the entries asked for, earliest first (the queues rid of keys that left memory)', () => {
  const q = new TimerQueue();
  for (const [at, key] of [[5, 'a'], [1, 'b'], [3, 'a'], [2, 'c'], [4, 'b']] as const) q.push({ at, key, name: 'n' });
  q.retain((e) => e.key !== 'b');
  const out: Array<[number, string]> = [];
  for (let e = q.pop(); e !== undefined; e = q.pop()) out.push([e.at, e.key]);
  expect(out).toEqual([
    [2, 'c'],
    [3, 'a'],
    [5, 'a'],
  ]);
});
