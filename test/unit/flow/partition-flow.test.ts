// kafka-flow's PartitionFlowSpec, reproduced: held offsets, commits, orphan flushes, filters,
// remapKey, ignorePersistErrors and revoke.
import { InMemorySnapshotStore } from '../../../persistence/memory';
import type { SnapshotStore } from '../../../persistence/snapshot-store';
import { StorePartitionPersistence } from '../../../persistence/store-partition-persistence';
import { InMemoryBackend } from '../../../persistence/memory';
import { type Count, countingFold, harness, records, TP } from './harness';

const orphanTimers = { unloadOrphaned: { fireEvery: 0, flushOnRevoke: true } };

async function constFixture(waitForN: number) {
  return harness({ fold: countingFold(waitForN), timers: orphanTimers, mode: 'journal+snapshots', assignedAt: 100 });
}

describe('PartitionFlow (kafka-flow PartitionFlowSpec)', () => {
  test('does not require a commit if no flows finished', async () => {
    const h = await constFixture(100);
    await h.step(records('key1', 100, ['event1', 'event2', 'event3']));
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.committed()).toBeUndefined();
    expect(h.flow.holdingOf('key1')).toBe(100);
  });

  test('does not commit on empty flows', async () => {
    const h = await constFixture(100);
    await h.step([]);
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.committed()).toBeUndefined();
  });

  test('allows a commit when working with a key is finished', async () => {
    const h = await constFixture(3);
    await h.step(records('key1', 100, ['event1', 'event2', 'event3']));
    expect(h.committed()).toBe(103);
    expect(h.flow.liveKeys).toBe(0);
  });

  test('does not allow a commit until working with a key is finished', async () => {
    const h = await constFixture(3);
    await h.step(records('key1', 100, ['event1', 'event2']));
    await h.step(records('key2', 102, ['event1', 'event2']));
    await h.step(records('key1', 104, ['event3']));
    expect(h.committed()).toBe(102);
    await h.step(records('key2', 105, ['event3']));
    expect(h.committed()).toBe(106);
  });

  test('does not flush until more than 100000 records have passed a key', async () => {
    const h = await constFixture(200_000);
    await h.step(records('key1', 100, ['event1']));
    const events = Array.from({ length: 99_999 }, (_, i) => `event${i + 1}`);
    await h.step(records('key2', 101, events));
    expect(h.committed()).toBeUndefined();
    expect(h.backend.journal.events(TP, 'key1')).toHaveLength(0);
    expect(h.flow.stateOf('key1')).toEqual({ offset: '100', count: 1 });
  });

  test('flushes (and unloads) a key when more than 100000 records have passed it', async () => {
    const h = await constFixture(200_000);
    await h.step(records('key1', 100, ['event1']));
    const events = Array.from({ length: 100_000 }, (_, i) => `event${i + 1}`);
    await h.step(records('key2', 101, events));
    expect(h.committed()).toBe(101);
    expect(h.backend.journal.events(TP, 'key1').map((e) => e.offset)).toEqual(['100']);
    expect(h.backend.snapshots.entries(TP).get('key1')).toEqual({ state: { offset: '100', count: 1 }, offset: 100 });
    expect(h.flow.stateOf('key1')).toBeUndefined();
    expect(h.flow.liveKeys).toBe(1);
  });

  // kafka-flow's "works reasonably fast" case, without the wall-clock assertion (speed is measured
  // in bench:engine, as a ratio, never asserted in a test): keys that finish leave nothing behind.
  test('100000 keys of 2 records in one batch: every key finishes, nothing is held or written', async () => {
    const h = await constFixture(2);
    const batch = [];
    for (let i = 1; i <= 100_000; i++) batch.push(...records(`key${i}`, i * 2, ['event1', 'event2']));
    await h.step(batch);
    expect(h.flow.liveKeys).toBe(0);
    expect(h.backend.snapshots.writes).toBe(0); // finished before any persist: no marker needed
    expect(h.committed()).toBe(200_002);
  });

  test('commits no new offset while a periodic persist fails with ignorePersistErrors', async () => {
    // Fails the write for key2 whose count is 3, like kafka-flow's failing SnapshotDatabase.
    const inner = new InMemorySnapshotStore<Count>();
    const failing: SnapshotStore<Count> = {
      read: (p, k) => inner.read(p, k),
      readAll: (p) => inner.readAll(p),
      async writeBatch(p, writes) {
        if (writes.some((w) => w.key === 'key2' && w.kind === 'put' && w.snapshot.state.count === 3)) throw new Error('Test error');
        return inner.writeBatch(p, writes);
      },
    };
    const backend = new InMemoryBackend<Count, string>();
    const persistence = new StorePartitionPersistence<Count, string>({
      partition: TP,
      mode: 'snapshots',
      snapshots: failing,
      keys: backend.keys,
      committer: backend.committer,
    });
    const h = await harness({
      fold: countingFold(5),
      backend,
      persistence,
      assignedAt: 100,
      timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0, ignorePersistErrors: true } },
    });
    await h.step([...records('key1', 100, ['event1', 'event2']), ...records('key2', 102, ['event3', 'event4'])]);
    expect(h.committed()).toBe(104);
    await h.step([...records('key1', 104, ['event5']), ...records('key2', 105, ['event6'])]);
    expect(h.committed()).toBe(104);
    expect(h.flow.holdingOf('key2')).toBe(104);
    await h.step([...records('key1', 106, ['event7']), ...records('key2', 107, ['event8'])]);
    expect(h.committed()).toBe(108);
  });

  test('filters out records but still commits their offsets', async () => {
    const folded = new Set<string>();
    const fold = countingFold(5);
    const h = await harness<Count>({
      fold: (s, r, ctx) => {
        folded.add(r.key);
        return fold(s, r, ctx);
      },
      assignedAt: 100,
      timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0, ignorePersistErrors: true } },
      extra: { filter: (r) => r.key !== 'key2' },
    });
    const snapshots = () => Object.fromEntries([...h.backend.snapshots.entries(TP)].map(([k, s]) => [k, s.state]));
    await h.step([...records('key1', 100, ['event1']), ...records('key2', 101, ['event2'])]);
    expect(h.committed()).toBe(102);
    expect([...folded]).toEqual(['key1']);
    expect(snapshots()).toEqual({ key1: { offset: '100', count: 1 } });
    await h.step(records('key2', 102, ['event3', 'event4']));
    expect(h.committed()).toBe(104);
    expect(snapshots()).toEqual({ key1: { offset: '100', count: 1 } });
    await h.step([...records('key1', 104, ['event5']), ...records('key2', 105, ['event6'])]);
    expect(h.committed()).toBe(106);
    expect([...folded]).toEqual(['key1']);
    expect(snapshots()).toEqual({ key1: { offset: '104', count: 2 } });
  });

  test('remapKey derives keys before filters and folds, and recovered keys are found by the derived key', async () => {
    const backend = new InMemoryBackend<string, string>();
    backend.snapshots.set(TP, 'key1-derived', { state: 'initial', offset: -1 });
    await backend.keys.add(TP, ['key1-derived']);
    const seenByFilter: string[] = [];
    const h = await harness<string>({
      backend,
      fold: (s, r) => (s === undefined ? r.value : `${s}+${r.value}`),
      timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0 } },
      extra: {
        remapKey: (key) => `${key}-derived`,
        filter: (r) => {
          seenByFilter.push(r.key);
          return true;
        },
      },
    });
    expect(h.flow.liveKeys).toBe(1);
    await h.step(records('key1', 1, ['value1']));
    expect(seenByFilter).toEqual(['key1-derived']);
    expect(backend.snapshots.entries(TP).get('key1-derived')?.state).toBe('initial+value1');
    expect(backend.keys.keys(TP)).toEqual(new Set(['key1-derived']));
    expect(h.committed()).toBe(2);
    await h.step(records('key2', 2, ['value2']));
    expect(backend.snapshots.entries(TP).get('key2-derived')?.state).toBe('value2');
    expect(backend.keys.keys(TP)).toEqual(new Set(['key1-derived', 'key2-derived']));
    expect(h.committed()).toBe(3);
  });

  test('on revoke with flushOnRevoke, commits the latest consumed offset when every key persisted', async () => {
    const h = await constFixture(100);
    await h.step(records('key1', 100, ['event1', 'event2']));
    await h.step(records('key2', 102, ['event1', 'event2']));
    await h.step(records('key3', 104, ['event1', 'event2']));
    expect(h.committed()).toBeUndefined();
    const result = await h.flow.persist(h.clock.now(), 'revoke');
    expect(result).toMatchObject({ committed: 106, written: 3, failed: 0 });
    expect(h.committed()).toBe(106);
  });

  test('on revoke, commits up to the oldest key that failed to persist, without throwing', async () => {
    const inner = new InMemorySnapshotStore<Count>();
    const failing: SnapshotStore<Count> = {
      read: (p, k) => inner.read(p, k),
      readAll: (p) => inner.readAll(p),
      async writeBatch(p, writes) {
        if (writes.some((w) => w.key === 'key2')) throw new Error('Test error');
        return inner.writeBatch(p, writes);
      },
    };
    const backend = new InMemoryBackend<Count, string>();
    const h = await harness({
      fold: countingFold(100),
      backend,
      persistence: new StorePartitionPersistence<Count, string>({
        partition: TP,
        mode: 'snapshots',
        snapshots: failing,
        committer: backend.committer,
        maxWritesPerBatch: 1,
      }),
      assignedAt: 100,
      timers: { unloadOrphaned: { flushOnRevoke: true } },
    });
    await h.step(records('key1', 100, ['event1', 'event2']));
    await h.step(records('key2', 102, ['event1', 'event2']));
    await h.step(records('key3', 104, ['event1', 'event2']));
    expect(h.committed()).toBeUndefined();
    const result = await h.flow.persist(h.clock.now(), 'revoke');
    expect(result).toMatchObject({ committed: 102, written: 2, failed: 1 });
    expect(h.committed()).toBe(102);
  });

  test('on revoke, a failing offset commit is swallowed', async () => {
    const h = await constFixture(100);
    let attempted = false;
    h.backend.committer.commit = async () => {
      attempted = true;
      throw new Error('fenced offset commit on revoke');
    };
    await h.step(records('key1', 100, ['event1', 'event2']));
    await expect(h.flow.persist(h.clock.now(), 'revoke')).resolves.toMatchObject({ committed: undefined, written: 1 });
    expect(attempted).toBe(true);
  });
});
