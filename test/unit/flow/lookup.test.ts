// PartitionFlow.lookup: a key's live state for the live state queries — from memory with the offset
// of its last record and whether the store holds it, from the store once unloaded, nothing for an
// unknown key.
import { countingFold, harness, MINUTE, records } from './harness';

describe('PartitionFlow.lookup', () => {
  test('a folded key: its state and last offset, not persisted until its write lands, persisted after', async () => {
    const h = await harness({ fold: countingFold(1_000), assignedAt: 100, timers: { persistPeriodically: { fireEvery: 0, persistEvery: MINUTE } } });
    await h.flow.handleBatch(records('key1', 100, ['a', 'b', 'c']));
    expect(await h.flow.lookup('key1')).toEqual({ from: 'memory', state: { offset: '102', count: 3 }, offset: 102, persisted: false });
    h.clock.advance(MINUTE);
    h.flow.triggerTimers();
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(await h.flow.lookup('key1')).toEqual({ from: 'memory', state: { offset: '102', count: 3 }, offset: 102, persisted: true });
    await h.flow.handleBatch(records('key1', 103, ['d']));
    expect(await h.flow.lookup('key1')).toMatchObject({ offset: 103, persisted: false });
  });

  test('an unknown key: undefined', async () => {
    const h = await harness({ fold: countingFold(1_000) });
    expect(await h.flow.lookup('nope')).toBeUndefined();
  });

  test('a key unloaded from memory: read from the store, persisted', async () => {
    const h = await harness({ fold: countingFold(200_000), assignedAt: 100, timers: { unloadOrphaned: { fireEvery: 0, flushOnRevoke: true } }, mode: 'snapshots' });
    await h.step(records('key1', 100, ['event1']));
    await h.step(records('key2', 101, Array.from({ length: 100_000 }, (_, i) => `e${i}`)));
    expect(h.flow.stateOf('key1')).toBeUndefined(); // unloaded
    expect(await h.flow.lookup('key1')).toEqual({ from: 'store', state: { offset: '100', count: 1 }, offset: 100, persisted: true });
    expect(h.flow.stateOf('key1')).toBeUndefined(); // the lookup loads nothing into memory
  });

  test('a transient flow (mode none) never says persisted', async () => {
    const h = await harness({ fold: countingFold(1_000), mode: 'none' });
    await h.flow.handleBatch(records('key1', 0, ['a']));
    expect(await h.flow.lookup('key1')).toMatchObject({ from: 'memory', persisted: false });
  });
});
