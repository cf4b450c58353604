// kafka-flow's KeyFlowSpec: a key processes, restores and deletes correctly; transient never flushes.
import type { KeyFlow } from '../../../flow/key-flow';
import { InMemoryBackend } from '../../../persistence/memory';
import { countingFold, harness, keyless, records, TP } from './harness';

describe('KeyFlow (kafka-flow KeyFlowSpec)', () => {
  test('processes records in offset order and journals each one', async () => {
    const h = await harness<string[]>({ fold: (s, r) => [...(s ?? []), r.value], mode: 'journal', assignedAt: 1 });
    await h.flow.handleBatch(records('key', 1, ['event1', 'event2', 'event3']));
    expect(h.flow.stateOf('key')).toEqual(['event1', 'event2', 'event3']);
    expect(h.flow.holdingOf('key')).toBe(1);
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.backend.journal.events(TP, 'key').map((e) => e.offset)).toEqual(['1', '2', '3']);
    expect(h.flow.holdingOf('key')).toBe(4);
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
    expect(restarted.flow.holdingOf('key')).toBe(5);
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
    expect(h.flow.holdingOf('key')).toBe(2);
    expect(h.flow.offsetToCommit()).toBeUndefined();
    // This backend commits apart from its writes: a delete marker first, its purge once committed past.
    const result = await h.flow.persist(h.clock.now(), 'periodic');
    expect(result).toMatchObject({ written: 1, committed: 3 });
    expect(h.backend.snapshots.markers(TP).get('key')).toBe(2);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.backend.snapshots.entries(TP).size).toBe(0);
    expect(h.backend.keys.keys(TP).size).toBe(0);
    expect(h.flow.liveKeys).toBe(0);
  });

  test('with writes and commit in one transaction (atomicCommit), a deletion the commit passes is purged at once', async () => {
    const backend = new InMemoryBackend<number, string>();
    const persistence = Object.assign(backend.forPartition(TP, 'snapshots'), { atomicCommit: true });
    let finish = false;
    const h = await harness<number>({ fold: (s) => (finish ? undefined : (s ?? 0) + 1), backend, persistence });
    await h.flow.handleBatch(records('key', 0, ['a', 'b']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    finish = true;
    await h.flow.handleBatch(records('key', 2, ['c']));
    expect(await h.flow.persist(h.clock.now(), 'periodic')).toMatchObject({ written: 1, committed: 3 });
    expect(h.backend.snapshots.entries(TP).size).toBe(0);
    expect(h.backend.snapshots.markers(TP).size).toBe(0);
    expect(h.flow.liveKeys).toBe(0);
  });

  test('with atomicCommit, a purge whose chunk cannot commit past the deletion gets a marker: a later chunk failing replays nothing from nothing', async () => {
    // One write a chunk: d1's purge lands with a commit capped by d2's hold (below d1's
    // deletion); d2's chunk then fails. Purged without a marker, d1 would be folded again from
    // nothing by the next owner's replay from that commit.
    const backend = new InMemoryBackend<string[], string>();
    const inner = backend.forPartition(TP, 'snapshots', 1);
    let writes = Number.NEGATIVE_INFINITY;
    const persistence = Object.assign(Object.create(inner) as typeof inner, {
      atomicCommit: true,
      write: (batch: Parameters<typeof inner.write>[0]) => {
        if (batch.writes.length > 0 && ++writes === 2) return Promise.reject(new Error('the second chunk failed'));
        return inner.write(batch);
      },
    });
    const fold = (s: string[] | undefined, r: { value: string; offset: string }) =>
      r.value === 'pop' ? (s === undefined ? [`-${r.offset}`] : s.length === 1 ? undefined : s.slice(0, -1)) : [...(s ?? []), r.offset];
    const h = await harness<string[]>({ fold, backend, persistence });
    await h.flow.handleBatch([...records('d1', 0, ['x']), ...records('d2', 1, ['x'])]);
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.committed()).toBe(2);
    writes = 0;
    await h.flow.handleBatch([...records('d2', 2, ['x']), ...records('d1', 3, ['pop']), ...records('d2', 4, ['pop', 'pop'])]);
    expect(await h.flow.persist(h.clock.now(), 'revoke')).toMatchObject({ written: 1, failed: 1 });
    expect(h.backend.snapshots.markers(TP).get('d1')).toBe(3);
    const next = await harness<string[]>({ fold, backend, assignedAt: h.committed() });
    await next.flow.handleBatch([...records('d2', 2, ['x']), ...records('d1', 3, ['pop']), ...records('d2', 4, ['pop', 'pop'])].slice(h.committed()! - 2));
    expect(next.flow.stateOf('d1')).toBeUndefined();
    expect(next.flow.stateOf('d2')).toBeUndefined();
  });

  test('without atomicCommit, a purge never lands without its commit: a replay after a failed commit keeps the deletion', async () => {
    // Writes land, then the offset commit fails (caching mode, Cassandra): the key must not be
    // folded again from nothing when the next owner replays from the old committed offset.
    const backend = new InMemoryBackend<string[], string>();
    const fold = (s: string[] | undefined, r: { value: string; offset: string }) =>
      r.value === 'pop' ? (s === undefined ? [`-${r.offset}`] : s.length === 1 ? undefined : s.slice(0, -1)) : [...(s ?? []), r.offset];
    const h = await harness<string[]>({ fold, backend });
    await h.flow.handleBatch(records('c', 0, ['x']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.committed()).toBe(1);
    await h.flow.handleBatch(records('c', 1, ['pop']));
    backend.committer.commit = async () => {
      throw new Error('commit refused');
    };
    await h.flow.persist(h.clock.now(), 'revoke');
    expect(h.committed()).toBe(1);
    // The next owner recovers from what was persisted and replays from the committed offset.
    const next = await harness<string[]>({ fold, backend, assignedAt: 1 });
    await next.flow.handleBatch(records('c', 1, ['pop']));
    expect(next.flow.stateOf('c')).toBeUndefined();
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
    expect(h.flow.holdingOf('key')).toBe(1);
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.backend.snapshots.writes).toBe(0);
    expect(h.committed()).toBeUndefined();
  });
});
