// Async folds: per-key order, the concurrency bound, the batch-by-batch default and the pipelined
// mode (asyncConcurrency), and the committed offset never passing a record still folding.
import fc from 'fast-check';
import { ConfigError } from '../../../config/errors';
import { FoldError } from '../../../flow/errors';
import type { Fold } from '../../../flow/fold';
import type { InputMessage } from '../../../flow/record';
import { defineFlow } from '../../../index';
import { harness, records } from './harness';

/** A gate per record: the fold of a record waits until its gate opens. */
class Gates {
  private readonly gates = new Map<string, { promise: Promise<void>; open: () => void }>();
  private gate(offset: string) {
    let g = this.gates.get(offset);
    if (!g) {
      let open!: () => void;
      const promise = new Promise<void>((r) => {
        open = r;
      });
      g = { promise, open };
      this.gates.set(offset, g);
    }
    return g;
  }
  wait(offset: string): Promise<void> {
    return this.gate(offset).promise;
  }
  open(offset: number | string): void {
    this.gate(String(offset)).open();
  }
}

const tick = () => new Promise((r) => setImmediate(r));

/** Messages for `keys[i]` at offset `from + i`. */
function interleaved(from: number, keys: readonly string[]): InputMessage[] {
  return keys.map((key, i) => ({ offset: String(from + i), key: Buffer.from(key), value: Buffer.from(`v${from + i}`), timestamp: '0' }));
}

describe('async folds', () => {
  test('pipelined: a slow key holds the committed offset at its record while later batches fold and persist', async () => {
    const gates = new Gates();
    const fold: Fold<string[], string> = async (s, r) => {
      if (r.key === 'slow') await gates.wait(r.offset);
      return [...(s ?? []), r.offset];
    };
    const h = await harness<string[]>({ fold, assignedAt: 0, extra: { asyncConcurrency: 4 } });
    // Batch 1: the slow key's record first, then fast ones; the batch returns before the slow fold ends.
    await h.flow.handleBatch(interleaved(0, ['slow', 'fast', 'fast', 'other']));
    await tick();
    expect(h.flow.stateOf('fast')).toEqual(['1', '2']);
    expect(h.flow.stateOf('slow')).toBeUndefined();
    // Batch 2 comes while the slow key still folds; its slow record waits behind the first.
    await h.flow.handleBatch(interleaved(4, ['fast', 'slow', 'other']));
    await tick();
    expect(h.flow.stateOf('fast')).toEqual(['1', '2', '4']);
    expect(h.flow.position).toBe(7);

    const persisted = await h.flow.persist(h.clock.now(), 'shutdown');
    expect(persisted.written).toBe(2); // fast and other; the slow key is still folding
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.committed()).toBeUndefined(); // held at 0 by the slow key's first record

    gates.open(0);
    await tick();
    expect(h.flow.stateOf('slow')).toEqual(['0']); // its second record (5) still waits
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.committed()).toBe(5); // the slow key now holds its record 5
    gates.open(5);
    await tick();
    expect(h.flow.stateOf('slow')).toEqual(['0', '5']);
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.committed()).toBe(7);
  });

  test('batch by batch (the default): a batch returns once every record of it is folded, its keys concurrently', async () => {
    const gates = new Gates();
    let inFlight = 0;
    let maxInFlight = 0;
    const fold: Fold<number, string> = async (s) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await gates.wait('all');
      inFlight--;
      return (s ?? 0) + 1;
    };
    const h = await harness<number>({ fold, assignedAt: 0 });
    let done = false;
    const batch = (h.flow.handleBatch(interleaved(0, ['a', 'b', 'c', 'a'])) as Promise<void>).then(() => {
      done = true;
    });
    await tick();
    expect(done).toBe(false);
    expect(maxInFlight).toBe(3); // a, b and c at once; a's second record after its first
    expect(() => h.flow.handleBatch(interleaved(4, ['a']))).toThrow(/before the previous batch finished/);
    gates.open('all');
    await batch;
    expect([h.flow.stateOf('a'), h.flow.stateOf('b'), h.flow.stateOf('c')]).toEqual([2, 1, 1]);
  });

  test('asyncConcurrency 1 folds one record at a time, in offset order', async () => {
    const order: string[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const fold: Fold<number, string> = async (s, r) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      order.push(r.offset);
      inFlight--;
      return (s ?? 0) + 1;
    };
    const h = await harness<number>({ fold, assignedAt: 0, extra: { asyncConcurrency: 1 } });
    await h.flow.handleBatch(interleaved(0, ['a', 'b', 'c', 'b', 'a']));
    await h.flow.handleBatch(interleaved(5, ['c', 'c']));
    for (let i = 0; i < 50 && order.length < 7; i++) await new Promise((r) => setTimeout(r, 2));
    expect(maxInFlight).toBe(1);
    expect(order).toHaveLength(7);
    expect([h.flow.stateOf('a'), h.flow.stateOf('b'), h.flow.stateOf('c')]).toEqual([2, 2, 3]);
  });

  test('property: any interleaving of keys, delays and batches folds every key in offset order, never more than asyncConcurrency at once, and commits only folded records', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd', 'e'), fc.nat(3)), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 8 }),
        async (recs, limit, batchSize) => {
          let inFlight = 0;
          let maxInFlight = 0;
          const folded = new Set<number>();
          const fold: Fold<number[], string> = async (s, r) => {
            inFlight++;
            maxInFlight = Math.max(maxInFlight, inFlight);
            const delay = recs[Number(r.offset)]![1];
            for (let i = 0; i < delay; i++) await tick();
            inFlight--;
            folded.add(Number(r.offset));
            return [...(s ?? []), Number(r.offset)];
          };
          const h = await harness<number[]>({ fold, assignedAt: 0, extra: { asyncConcurrency: limit } });
          const keys = recs.map(([k]) => k);
          for (let from = 0; from < keys.length; from += batchSize) {
            await h.flow.handleBatch(interleaved(from, keys.slice(from, from + batchSize)));
            // Whatever is committed now was folded (every record below it).
            await h.flow.persist(h.clock.now(), 'shutdown');
            const c = h.committed() ?? 0;
            for (let o = 0; o < c; o++) if (!folded.has(o)) throw new Error(`committed ${c} but record ${o} is not folded`);
          }
          for (let i = 0; i < 200 && folded.size < keys.length; i++) await tick();
          expect(maxInFlight).toBeLessThanOrEqual(limit);
          for (const key of new Set(keys)) {
            const expected = keys.flatMap((k, o) => (k === key ? [o] : []));
            expect(h.flow.stateOf(key)).toEqual(expected);
          }
          await h.flow.persist(h.clock.now(), 'shutdown');
          expect(h.committed()).toBe(keys.length);
        },
      ),
      { numRuns: 60 },
    );
  });

  test('pipelined: an async fold that fails stops the partition; the next batch and the timers see it', async () => {
    const fold: Fold<number, string> = async (s, r) => {
      await tick();
      if (r.value === 'boom') throw new Error('boom');
      return (s ?? 0) + 1;
    };
    const h = await harness<number>({ fold, assignedAt: 0, extra: { asyncConcurrency: 2 } });
    await h.flow.handleBatch(records('k', 0, ['ok', 'boom']));
    for (let i = 0; i < 10 && h.flow.failed === undefined; i++) await tick();
    expect(h.flow.failed).toBeInstanceOf(FoldError);
    expect(() => h.flow.handleBatch(records('k', 2, ['ok']))).toThrow(FoldError);
    expect(() => h.flow.triggerTimers()).toThrow(FoldError);
  });

  test('records of a key read back from the store wait for it, then fold in order (sync fold)', async () => {
    const h = await harness<string>({ fold: (s, r) => `${s ?? ''}${r.value}`, timers: { unloadOrphaned: { fireEvery: 0, maxOffsetDifference: 1 } } });
    await h.step(records('k', 0, ['a']));
    await h.step(records(null, 1, ['x', 'x', 'x']));
    expect(h.flow.stateOf('k')).toBeUndefined(); // unloaded
    await h.flow.handleBatch([...records('k', 4, ['b']), ...records('j', 5, ['c']), ...records('k', 6, ['d'])]);
    expect(h.flow.stateOf('k')).toBe('abd');
    expect(h.flow.stateOf('j')).toBe('c');
  });

  test('asyncConcurrency is validated', () => {
    const base = { name: 'f', groupId: 'g', topics: ['t'], fold: () => 1 };
    expect(() => defineFlow({ ...base, asyncConcurrency: 0 })).toThrow(ConfigError);
    expect(() => defineFlow({ ...base, asyncConcurrency: 1.5 })).toThrow(/asyncConcurrency/);
    expect(defineFlow({ ...base, asyncConcurrency: 32 }).asyncConcurrency).toBe(32);
    expect(defineFlow(base).asyncConcurrency).toBeUndefined();
  });
});
