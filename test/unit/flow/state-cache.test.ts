// The bounded state cache (FlowOptions.stateCache): the worker-wide count and each partition's
// share of the excess (StateCache), which keys may leave memory (PartitionKeys.unloadClean), and
// the engine over a backend that reads keys on demand — here an in-memory fake of one (the
// in-memory backend's store, its `recover()` yielding nothing and `has` answered from its Map; the
// real one, LMDB-backed, is covered in test/unit/persistence/kafka/local-state.test.ts and
// test/integration/local-state/state-cache.test.ts).
import type { PartitionPersistence, RecoveredKey } from '../../../flow/ports';
import { KeyFlow } from '../../../flow/key-flow';
import { PartitionKeys } from '../../../flow/partition-keys';
import { KEY_BYTES, StateCache, type Unloaded } from '../../../flow/state-cache';
import { InMemoryBackend } from '../../../persistence/memory';
import { type Count, countingFold, harness, MINUTE, records, TP } from './harness';
import { withReadNow } from './on-demand-fake';

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

/** onDemand with the store's synchronous read too (`readNow`, as the local store has). */
function onDemandReadNow<S>(backend: InMemoryBackend<S, string>): PartitionPersistence<S, string> {
  return withReadNow(onDemand(backend), backend);
}

/** `on`, reporting stored sizes as a real backend does (here: a snapshot's JSON length). */
function sized<S>(on: (backend: InMemoryBackend<S, string>) => PartitionPersistence<S, string>, backend: InMemoryBackend<S, string>): PartitionPersistence<S, string> {
  const plain = on(backend);
  const sizeOf = (snapshot: unknown) => (snapshot === undefined ? 0 : JSON.stringify(snapshot).length);
  const readNow = plain.readNow;
  return {
    ...plain,
    read: async (key) => {
      const found = await plain.read!(key);
      return found && { ...found, size: sizeOf(found.snapshot) };
    },
    ...(readNow
      ? {
          readNow: (key: string) => {
            const found = readNow(key);
            return found && { ...found, size: sizeOf(found.snapshot) };
          },
        }
      : {}),
    write: async (batch) => ({ ...(await plain.write(batch)), sizes: batch.writes.map((w) => sizeOf(w.snapshot)) }),
  };
}

const persistEveryMinute = { persistPeriodically: { fireEvery: 0, persistEvery: MINUTE } };

function distinctKeys(from: number, n: number, value = 'v') {
  return Array.from({ length: n }, (_, i) => records(`k${i}`, from + i, [value])[0]!);
}

describe('StateCache', () => {
  const keysOnly = (n: number) => ({ keys: n, bytes: 0 });

  test('under the bound nothing is unloaded; over it the reporting partition unloads its share, down to 90 %', () => {
    const cache = new StateCache({ maxKeys: 100 });
    const asked: number[] = [];
    const unload = (want: Unloaded) => {
      asked.push(want.keys);
      expect(want.bytes).toBe(0); // no byte bound
      return want;
    };
    expect(cache.report('t:0', keysOnly(60), unload).keys).toBe(0);
    expect(cache.report('t:1', keysOnly(40), unload).keys).toBe(0);
    expect(cache.liveKeys).toBe(100);
    // 150 live, target 90: 60 over, t:1 holds 90 of 150 → 36.
    expect(cache.report('t:1', keysOnly(90), unload).keys).toBe(36);
    expect(asked).toEqual([36]);
    expect(cache.liveKeys).toBe(114);
    // A partition that can unload nothing more says so; its count stays.
    expect(cache.report('t:0', keysOnly(60), () => ({ keys: 0, bytes: 0 })).keys).toBe(0);
    expect(cache.liveKeys).toBe(114);
    cache.forget('t:1');
    expect(cache.liveKeys).toBe(60);
  });

  test('a byte bound: over it the reporting partition unloads its share of the excess bytes, down to 90 %', () => {
    const cache = new StateCache({ maxBytes: 100_000 });
    const asked: Unloaded[] = [];
    const unload = (want: Unloaded) => {
      asked.push(want);
      return { keys: 3, bytes: want.bytes };
    };
    expect(cache.report('t:0', { keys: 1_000, bytes: 60_000 }, unload).bytes).toBe(0);
    // 140,000 bytes, target 90,000: 50,000 over, t:1 holds 80,000 of 140,000 → 28,572; no key bound.
    expect(cache.report('t:1', { keys: 5, bytes: 80_000 }, unload)).toEqual({ keys: 3, bytes: 28_572 });
    expect(asked).toEqual([{ keys: 0, bytes: 28_572 }]);
    expect(cache.liveBytes).toBe(60_000 + 80_000 - 28_572);
    cache.forget('t:0');
    expect([cache.liveKeys, cache.liveBytes]).toEqual([2, 80_000 - 28_572]);
  });

  test('both bounds: the partition is asked for its share of each bound it passes', () => {
    const cache = new StateCache({ maxKeys: 100, maxBytes: 10_000 });
    let asked: Unloaded | undefined;
    cache.report('t:0', { keys: 200, bytes: 20_000 }, (want) => {
      asked = want;
      return want;
    });
    expect(asked).toEqual({ keys: 110, bytes: 11_000 });
  });

  test('bounds must be given and sane', () => {
    expect(() => new StateCache({ maxKeys: 0 })).toThrow(/positive integer/);
    expect(() => new StateCache({ maxKeys: 1.5 })).toThrow(/positive integer/);
    expect(() => new StateCache({ maxBytes: KEY_BYTES - 1 })).toThrow(/maxBytes must be an integer of at least 200/);
    expect(() => new StateCache({})).toThrow(/needs maxKeys, maxBytes or both/);
  });
});

describe('PartitionKeys.unloadClean', () => {
  const n = (keys: number) => ({ keys, bytes: 0 });

  function key(keys: PartitionKeys<number, string>, name: string, touched: number, setup?: (kf: KeyFlow<number, string>) => void, size = 0): KeyFlow<number, string> {
    const kf = new KeyFlow<number, string>(name, touched, 0, false);
    kf.state = 1;
    kf.stored = true;
    kf.storedSize = size;
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
    expect(keys.unloadClean(n(2), 10).keys).toBe(2);
    expect([...keys.live.keys()].sort()).toEqual(['busy', 'dirty', 'never-stored', 'outputs', 'recent', 'timers', 'writing']);
    expect(keys.unloaded.size).toBe(0);
    // Nothing untouched since 10 is left: a recently touched clean key goes next.
    expect(keys.unloadClean(n(5), 10).keys).toBe(1);
    expect(keys.live.has('recent')).toBe(false);
  });

  test('when every key was touched since, the least recently touched go — not the map\'s oldest (under skewed keys, the hottest)', () => {
    const keys = new PartitionKeys<number, string>(0, true);
    key(keys, 'hot', 100); // inserted first, touched last
    key(keys, 'cold', 20);
    key(keys, 'warm', 60);
    key(keys, 'warmer', 60, (kf) => {
      kf.touchedOffset = 9; // same clock reading, a later record than warm's
    });
    expect(keys.unloadClean(n(2), 10).keys).toBe(2);
    expect([...keys.live.keys()].sort()).toEqual(['hot', 'warmer']);
  });

  test('with the timers in the store (its due-time index), a key with pending timers may leave too', () => {
    const keys = new PartitionKeys<number, string>(0, true);
    keys.timersInStore = true;
    key(keys, 'timers', 0, (kf) => {
      kf.timers = [{ name: 't', at: 1, time: 'processing' }];
    });
    expect(keys.unloadClean(n(1), 10).keys).toBe(1);
    expect(keys.live.size).toBe(0);
  });

  test('a byte target: keys leave, oldest first, until their bytes (stored size + KEY_BYTES each) reach it', () => {
    const keys = new PartitionKeys<number, string>(0, true);
    key(keys, 'small', 0, undefined, 100);
    key(keys, 'big', 1, undefined, 5_000);
    key(keys, 'also-big', 2, undefined, 5_000);
    expect(keys.live.bytes).toBe(10_100 + 3 * KEY_BYTES);
    expect(keys.unloadClean({ keys: 0, bytes: 1_000 }, 10)).toEqual({ keys: 2, bytes: 5_100 + 2 * KEY_BYTES });
    expect([...keys.live.keys()]).toEqual(['also-big']);
    expect(keys.live.bytes).toBe(5_000 + KEY_BYTES);
  });

  test("the live keys' bytes follow every way a key comes, goes or changes size", () => {
    const keys = new PartitionKeys<number, string>(0, true);
    const a = key(keys, 'a', 0, undefined, 300);
    const b = key(keys, 'b', 0, undefined, 50);
    expect(keys.live.storedBytes).toBe(350);
    keys.resize(a, 1_000);
    expect(keys.live.storedBytes).toBe(1_050);
    keys.live.delete('b');
    keys.live.delete('b');
    expect(keys.live.storedBytes).toBe(1_000);
    // A key not in memory changes size without counting.
    keys.resize(b, 70);
    expect(keys.live.storedBytes).toBe(1_000);
    // A key replaced by a newer object of the same name counts once.
    keys.live.set('b', b);
    const b2 = key(keys, 'b', 0, undefined, 90);
    expect(keys.live.get('b')).toBe(b2);
    expect(keys.live.storedBytes).toBe(1_090);
    keys.evict(a);
    expect(keys.live.storedBytes).toBe(90);
    keys.live.clear();
    expect(keys.live.bytes).toBe(0);
  });

  test('a stored size shares the bit field with the flags: neither disturbs the other, and sizes saturate at 8 MiB - 1', () => {
    const kf = new KeyFlow<number, string>('k', 0, 0, false);
    kf.stored = true;
    kf.markChanged();
    kf.storedSize = 123_456;
    expect([kf.stored, kf.dirty, kf.storedSize]).toEqual([true, true, 123_456]);
    kf.stored = false;
    kf.markClean();
    expect([kf.stored, kf.dirty, kf.storedSize]).toEqual([false, false, 123_456]);
    kf.storedSize = 1e12;
    expect(kf.storedSize).toBe(2 ** 23 - 1);
    expect(kf.stored).toBe(false);
    kf.storedSize = 0;
    expect(kf.storedSize).toBe(0);
  });

  test('not on demand: an unloaded key is remembered as unloaded', () => {
    const keys = new PartitionKeys<number, string>(0);
    key(keys, 'a', 0);
    expect(keys.unloadClean(n(1), 10).keys).toBe(1);
    expect([...keys.unloaded]).toEqual(['a']);
  });
});

describe.each([
  ['read back (`read`)', onDemand],
  ['read now (`readNow`)', onDemandReadNow],
])('PartitionFlow with a bounded state cache (in-memory fake of an on-demand backend), keys %s', (_how, onDemand) => {
  const onDemandSized = <S>(backend: InMemoryBackend<S, string>) => sized(onDemand as (b: InMemoryBackend<S, string>) => PartitionPersistence<S, string>, backend);

  test('over the bound, persisted keys leave memory; their next records read them back and fold on from their state', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const cache = new StateCache({ maxKeys: 10 });
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

  test('a byte bound: keys leave by their stored size, so a few big keys take the room of many small ones', async () => {
    const backend = new InMemoryBackend<{ pad: string }, string>();
    const KB = 1_024;
    const big = (key: string) => Number(key.slice(1)) >= 100;
    // k0–k99 hold a few bytes each, k100–k109 (the most recently touched) 4 KiB each.
    const fold = (_s: unknown, r: { key: string | null }) => ({ pad: big(r.key!) ? 'x'.repeat(4 * KB) : 'x' });
    const cache = new StateCache({ maxBytes: 20 * KB });
    const h = await harness<{ pad: string }>({ fold, backend, persistence: onDemandSized(backend), timers: persistEveryMinute, extra: { stateCache: cache } });
    const liveBig = () => [...h.flow.states()].filter(([key]) => big(key)).length;
    await h.flow.handleBatch(distinctKeys(0, 110));
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(backend.snapshots.entries(TP).size).toBe(110);
    // Down to 90 % of the bound (18 KiB): at most four big keys stay. Counted by keys alone
    // (200 bytes each) the ten big keys, touched last, would all stay.
    expect(liveBig()).toBeLessThanOrEqual(4);
    expect(cache.liveBytes).toBeLessThanOrEqual(20 * KB);
    expect(cache.liveBytes).toBeGreaterThan(0);
    expect((await h.metrics.keysLiveBytes.get()).values[0]!.value).toBe(cache.liveBytes);
    // Every big key again: each is read back with its stored size, and the bound holds after the persist.
    await h.flow.handleBatch(Array.from({ length: 10 }, (_, i) => records(`k${100 + i}`, 110 + i, ['again'])[0]!));
    h.clock.advance(MINUTE);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(liveBig()).toBeLessThanOrEqual(4);
    expect(cache.liveBytes).toBeLessThanOrEqual(20 * KB);
    expect(await h.flow.lookup('k103')).toMatchObject({ state: { pad: 'x'.repeat(4 * KB) }, persisted: true });
  });

  test('a restart loads no key: each is read when a record comes for it', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const first = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), timers: persistEveryMinute, extra: { stateCache: new StateCache({ maxKeys: 5 }) } });
    await first.flow.handleBatch([...distinctKeys(0, 20), ...records('k3', 20, ['a', 'b'])]);
    first.clock.advance(MINUTE);
    await first.flow.persist(first.clock.now(), 'periodic');

    // Assigned at 5: a replay from a commit behind the snapshots (one whose commit did not land).
    const again = await harness<Count>({ fold: countingFold(1_000), backend, persistence: onDemand(backend), assignedAt: 5, timers: persistEveryMinute, extra: { stateCache: new StateCache({ maxKeys: 5 }) } });
    expect(again.flow.liveKeys).toBe(0);
    // A record at or below a key's stored offset is skipped, as after a full recovery.
    await again.flow.handleBatch(records('k7', 7, ['replayed']));
    await again.flow.handleBatch(records('k3', 22, ['c']));
    expect(again.flow.stateOf('k3')).toEqual({ offset: '22', count: 4 });
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
