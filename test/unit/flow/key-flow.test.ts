// kafka-flow's KeyFlowSpec: a key processes, restores and deletes correctly; transient never flushes.
import type { KeyFlow } from '../../../flow/key-flow';
import { countingFold, harness, keyless, records, TP } from './harness';

describe('KeyFlow (kafka-flow KeyFlowSpec)', () => {
  test('processes records in offset order and journals each one', async () => {
    const h = await harness<string[]>({ fold: (s, r) => [...(s ?? []), r.value], mode: 'journal', assignedAt: 1 });
    await h.flow.handleBatch(records('key', 1, ['event1', 'event2', 'event3']));
    expect(h.flow.stateOf('key')).toEqual(['event1', 'event2', 'event3']);
    expect(h.flow.holdingOf('key')).toBe('1');
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.backend.journal.events(TP, 'key').map((e) => e.offset)).toEqual(['1', '2', '3']);
    expect(h.flow.holdingOf('key')).toBe('4');
  });

  test('is small: one object per key, clocks as small integers, no sub-objects on the common path', async () => {
    const h = await harness<number>({ fold: (s) => (s ?? 0) + 1 });
    await h.flow.handleBatch(records('key', 0, ['a', 'b']));
    const kf = (h.flow as unknown as { keys: Map<string, KeyFlow<number, string>> }).keys.get('key')!;
    const own = Object.values(kf).filter((v) => typeof v === 'object' && v !== null);
    expect(own).toEqual([]); // no per-key arrays, timestamps or contexts
    for (const clock of [kf.touchedClock, kf.flushedClock, kf.timerAt!]) expect(Number.isInteger(clock) && Math.abs(clock) < 2 ** 30).toBe(true);
  });

  test('restores from a snapshot and skips records at or below its offset', async () => {
    const h = await harness({ fold: countingFold(100), mode: 'journal+snapshots', assignedAt: 1 });
    h.backend.snapshots.set(TP, 'key', { state: { offset: '1', count: 1 }, offset: 1 });
    await h.backend.keys.add(TP, ['key']);
    const restarted = await harness({ fold: countingFold(100), mode: 'journal+snapshots', assignedAt: 1, backend: h.backend });
    await restarted.flow.handleBatch(records('key', 1, ['event1', 'event2', 'event3', 'event4']));
    expect(restarted.flow.stateOf('key')).toEqual({ offset: '4', count: 4 });
    await restarted.flow.persist(restarted.clock.now(), 'shutdown');
    expect(h.backend.journal.events(TP, 'key').map((e) => e.offset)).toEqual(['2', '3', '4']);
    expect(restarted.flow.holdingOf('key')).toBe('5');
  });

  test('restores by replaying its journal (journal mode)', async () => {
    const h = await harness({ fold: countingFold(100), mode: 'journal', assignedAt: 0 });
    await h.flow.handleBatch(records('key', 0, ['a', 'b']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    const restarted = await harness({ fold: countingFold(100), mode: 'journal', assignedAt: 0, backend: h.backend });
    expect(restarted.flow.stateOf('key')).toEqual({ offset: '1', count: 2 });
    await restarted.flow.handleBatch(records('key', 0, ['a', 'b', 'c']));
    expect(restarted.flow.stateOf('key')).toEqual({ offset: '2', count: 3 });
  });

  test('does not delete prematurely: a fold that keeps state never deletes', async () => {
    const h = await harness<number>({ fold: () => 7, timers: { unloadOrphaned: {} } });
    await h.step(records('key', 1, ['event1']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.flow.stateOf('key')).toBe(7);
    expect(h.backend.snapshots.entries(TP).get('key')).toEqual({ state: 7, offset: 1 });
  });

  test('deletes the persisted state when the fold returns undefined, at the next persist', async () => {
    let finish = false;
    const h = await harness<number>({ fold: (s) => (finish ? undefined : (s ?? 0) + 1) });
    await h.flow.handleBatch(records('key', 0, ['a', 'b']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.backend.snapshots.entries(TP).get('key')).toEqual({ state: 2, offset: 1 });
    expect(h.backend.keys.keys(TP)).toEqual(new Set(['key']));
    finish = true;
    await h.flow.handleBatch(records('key', 2, ['c']));
    // Still holding its old offset until the delete lands.
    expect(h.flow.holdingOf('key')).toBe('2');
    expect(h.flow.offsetToCommit()).toBeUndefined();
    const result = await h.flow.persist(h.clock.now(), 'periodic');
    expect(result).toMatchObject({ written: 1, committed: '3' });
    expect(h.backend.snapshots.entries(TP).size).toBe(0);
    expect(h.backend.keys.keys(TP).size).toBe(0);
    expect(h.flow.liveKeys).toBe(0);
  });

  test('a key that returns undefined mid-batch and state again later keeps the later state', async () => {
    const h = await harness<string>({ fold: (s, r) => (r.value === 'reset' ? undefined : `${s ?? ''}${r.value}`) });
    await h.flow.handleBatch(records('key', 0, ['a', 'reset', 'b']));
    expect(h.flow.stateOf('key')).toBe('b');
  });

  test('transient (persistence mode none) never flushes and keeps holding its first offset', async () => {
    const h = await harness({ fold: countingFold(1_000_000), mode: 'none', assignedAt: 1, timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0 } } });
    await h.step(records('key', 1, ['event1']));
    await h.step(keyless(2, 100_000));
    expect(h.flow.holdingOf('key')).toBe('1');
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.backend.snapshots.writes).toBe(0);
    expect(h.committed()).toBeUndefined();
  });
});
