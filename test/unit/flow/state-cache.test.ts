// The bounded state cache (FlowOptions.stateCache): the worker-wide count and each partition's
// share of the excess (StateCache), which keys may leave memory (PartitionKeys.unloadClean), and
// the engine over a backend that reads keys on demand — here an in-memory fake of one (the
// in-memory backend's store, its `recover()` yielding nothing and `has` answered from its Map; the
// real one, LMDB-backed, is covered in test/unit/persistence/kafka/local-state.test.ts and
// test/integration/local-state/state-cache.test.ts).
import type { PartitionPersistence, RecoveredKey } from '../../../flow/ports';
import { KeyFlow } from '../../../flow/key-flow';
import { PartitionKeys } from '../../../flow/partition-keys';
import { StateCache } from '../../../flow/state-cache';
import { InMemoryBackend } from '../../../persistence/memory';
import { type Count, countingFold, harness, MINUTE, records, TP } from './harness';

/** The in-memory backend's partition persistence, reading keys on demand (an in-memory fake of the local-state backend's mode). */
function onDemand<S>(backend: InMemoryBackend<S, string>): PartitionPersistence<S, string> {
  const inner = backend.forPartition(TP, 'snapshots');
  return {
    maxWritesPerBatch: inner.maxWritesPerBatch,
    recover: () => ({
      [Symbol.asyncIterator]: () => ({ next: async (): Promise<IteratorResult<RecoveredKey<S, string>>> => ({ value: undefined, done: true }) }),
    }),
    read: (key) => inner.read(key),
    write: (batch) => inner.write(batch),
    has: (key) => backend.snapshots.has(TP, key),
  };
}

const persistEveryMinute = { persistPeriodically: { fireEvery: 0, persistEvery: MINUTE } };

function distinctKeys(from: number, n: number, value = 'v') {
  return Array.from({ length: n }, (_, i) => records(`k${i}`, from + i, [value])[0]!);
}

describe('StateCache', () => {
  test('under the bound nothing is unloaded; over it the reporting partition unloads its share, down to 90 %', () => {
    const cache = new StateCache(100);
    const asked: number[] = [];
    const unload = (n: number) => {
      asked.push(n);
      return n;
    };
    expect(cache.report('t:0', 60, unload)).toBe(0);
    expect(cache.report('t:1', 40, unload)).toBe(0);
    expect(cache.liveKeys).toBe(100);
    // 150 live, target 90: 60 over, t:1 holds 90 of 150 → 36.
    expect(cache.report('t:1', 90, unload)).toBe(36);
    expect(asked).toEqual([36]);
    expect(cache.liveKeys).toBe(114);
    // A partition that can unload nothing more says so; its count stays.
    expect(cache.report('t:0', 60, () => 0)).toBe(0);
    expect(cache.liveKeys).toBe(114);
    cache.forget('t:1');
    expect(cache.liveKeys).toBe(60);
  });

  test('maxKeys must be a positive integer', () => {
    expect(() => new StateCache(0)).toThrow(/positive integer/);
    expect(() => new StateCache(1.5)).toThrow(/positive integer/);
  });
});

describe('PartitionKeys.unloadClean', () => {
  function key(keys: PartitionKeys<number, string>, name: string, touched: number, setup?: (kf: KeyFlow<number, string>) => void): KeyFlow<number, string> {
    const kf = new KeyFlow<number, string>(name, touched, 0, false);
    kf.state = 1;
    kf.stored = true;
    kf.markClean();
    setup?.(kf);
    keys.live.set(name, kf);
    return kf;
  }

  test('only keys whose state the store holds as in memory leave, least recently touched first; on demand they are not remembered', () => {
    const keys = new PartitionKeys<number, string>(0, true);
    key(keys, 'dirty', 0, (kf) => kf.markChanged());
    key(keys, 'timers', 0, (kf) => {
      kf.timers = [{ name: 't', at: 1, time: 'processing' }];
    });
    key(keys, 'outputs', 0, (kf) => kf.addOutputs([{ topic: 'o', key: null, value: Buffer.from('x') } as never]));
    key(keys, 'busy', 0, (kf) => {
      kf.extras().queue = [];
    });
    key(keys, 'never-stored', 0, (kf) => {
      kf.stored = false;
    });
    const writing = key(keys, 'writing', 0);
    keys.writing.add(writing);
    key(keys, 'recent', 50);
    key(keys, 'old1', 1);
    key(keys, 'old2', 2);
    expect(keys.unloadClean(2, 10)).toBe(2);
    expect([...keys.live.keys()].sort()).toEqual(['busy', 'dirty', 'never-stored', 'outputs', 'recent', 'timers', 'writing']);
    expect(keys.unloaded.size).toBe(0);
    // Nothing untouched since 10 is left: a recently touched clean key goes next.
    expect(keys.unloadClean(5, 10)).toBe(1);
    expect(keys.live.has('recent')).toBe(false);
  });

  test('with the timers in the store (its due-time index), a key with pending timers may leave too', () => {
    const keys = new PartitionKeys<number, string>(0, true);
    keys.timersInStore = true;
    key(keys, 'timers', 0, (kf) => {
      kf.timers = [{ name: 't', at: 1, time: 'processing' }];
    });
    expect(keys.unloadClean(1, 10)).toBe(1);
    expect(keys.live.size).toBe(0);
  });

  test('not on demand: an unloaded key is remembered as unloaded', () => {
    const keys = new PartitionKeys<number, string>(0);
    key(keys, 'a', 0);
    expect(keys.unloadClean(1, 10)).toBe(1);
    expect([...keys.unloaded]).toEqual(['a']);
  });
});

describe('PartitionFlow with a bounded state cache (in-memory fake of an on-demand backend)', () => {
  test('over the bound, persisted keys leave memory; their next records read them back and fold on from their state', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const cache = new StateCache(10);
    const h = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), timers: persistEveryMinute, extra: { stateCache: cache } });
    await h.flow.handleBatch(distinctKeys(0, 100));
    // Every key is changed: none can leave before it is written.
    expect(h.flow.liveKeys).toBe(100);
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.flow.liveKeys).toBeLessThanOrEqual(9);
    expect(cache.liveKeys).toBe(h.flow.liveKeys);
    expect(backend.snapshots.entries(TP).size).toBe(100);
    const evicted = (await h.metrics.keysEvicted.get()).values.reduce((n, v) => n + v.value, 0);
    expect(evicted).toBe(100 - h.flow.liveKeys);

    // Every key again: the unloaded ones are read back (their counts go on), then written.
    await h.flow.handleBatch(distinctKeys(100, 100));
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.committed()).toBe(200);
    for (const [key, s] of backend.snapshots.entries(TP)) expect([key, s.state.count]).toEqual([key, 2]);
    expect(h.flow.liveKeys).toBeLessThanOrEqual(9);
    expect(await h.flow.lookup('k0')).toMatchObject({ state: { count: 2 }, persisted: true });
  });

  test('a restart loads no key: each is read when a record comes for it', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const first = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), timers: persistEveryMinute, extra: { stateCache: new StateCache(5) } });
    await first.flow.handleBatch([...distinctKeys(0, 20), ...records('k3', 20, ['a', 'b'])]);
    first.clock.advance(MINUTE);
    await first.flow.persist(first.clock.now(), 'periodic');

    const again = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), assignedAt: 22, timers: persistEveryMinute, extra: { stateCache: new StateCache(5) } });
    expect(again.flow.liveKeys).toBe(0);
    await again.flow.handleBatch(records('k3', 22, ['c']));
    expect(again.flow.stateOf('k3')).toEqual({ offset: '22', count: 4 });
    // A record at or below a key's stored offset is skipped, as after a full recovery.
    await again.flow.handleBatch(records('k7', 7, ['replayed']));
    expect(again.flow.stateOf('k7')).toEqual({ offset: '7', count: 1 });
  });

  test('without the cache option nothing is unloaded', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const h = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), timers: persistEveryMinute });
    await h.flow.handleBatch(distinctKeys(0, 50));
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.flow.liveKeys).toBe(50);
  });
});
