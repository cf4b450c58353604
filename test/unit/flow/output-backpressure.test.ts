// maxPendingOutputs (the engine's side): a partition counts the outputs it holds until they land —
// on their keys, or in a write in flight — and says when that reaches its bound, so that the owner
// persists them at once and folds nothing more meanwhile (workers/runtime/flow-runtime.ts).
import { jsonCodec } from '../../../core/codec/json';
import type { Fold } from '../../../flow/fold';
import { PartitionStateError, PersistFailedError } from '../../../flow/errors';
import type { PartitionPersistence, WriteBatch } from '../../../flow/ports';
import { InMemoryBackend } from '../../../persistence/memory';
import { harness, MINUTE, records, TP } from './harness';

const outputs = { topics: new Set(['out']), encoder: jsonCodec<unknown>() };
const slowTimers = { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE } };

/** Counts records; emits one output per record (its offset). */
const echo: Fold<number, string> = (s, r, ctx) => {
  ctx.emit({ topic: 'out', key: r.key, value: Number(r.offset) });
  return (s ?? 0) + 1;
};

const sentOffsets = (backend: InMemoryBackend<number, string>) => backend.outputs.sent.map((o) => JSON.parse(String(o.value)) as number);

/** A persistence whose writes wait for `release()` (one write in flight at a time), or fail while `failing`. */
function gated(inner: PartitionPersistence<number, string>) {
  let open: (() => void) | undefined;
  const state = { failing: false, waiting: 0 };
  const persistence: PartitionPersistence<number, string> = {
    maxWritesPerBatch: inner.maxWritesPerBatch,
    recover: () => inner.recover(),
    read: (key) => inner.read(key),
    async write(batch: WriteBatch<number, string>) {
      if (state.failing && batch.writes.length > 0) throw new Error('broker away');
      if (batch.writes.length > 0) {
        state.waiting++;
        await new Promise<void>((resolve) => (open = resolve));
        state.waiting--;
      }
      return inner.write(batch);
    },
  };
  return { persistence, state, release: () => open?.() };
}

describe('maxPendingOutputs: the outputs a partition holds until they land', () => {
  test('counted from the emit until they land; due at half the bound, full at the bound', async () => {
    const h = await harness<number>({ fold: echo, timers: slowTimers, extra: { outputs, outputEvery: MINUTE, maxPendingOutputs: 10 } });
    await h.flow.handleBatch([...records('a', 0, ['x', 'x']), ...records('b', 2, ['x', 'x'])]);
    expect(h.flow.pendingOutputs).toBe(4);
    expect(h.flow.outputsFull()).toBe(false);
    expect(h.flow.outputsDue(h.clock.now())).toBe(false); // outputEvery (1 min) has not passed, under half the bound
    await h.flow.handleBatch(records('a', 4, ['x']));
    expect(h.flow.pendingOutputs).toBe(5);
    expect(h.flow.outputsFull()).toBe(false);
    expect(h.flow.outputsDue(h.clock.now())).toBe(true); // half the bound: a persist should start, folding goes on
    await h.flow.handleBatch(records('b', 5, ['x', 'x', 'x', 'x', 'x']));
    expect(h.flow.pendingOutputs).toBe(10);
    expect(h.flow.outputsFull()).toBe(true);
    expect(h.flow.outputsDue(h.clock.now())).toBe(true);

    const r = await h.flow.persist(h.clock.now(), 'outputs');
    expect(r).toMatchObject({ outputs: 10, written: 2 });
    expect(h.flow.pendingOutputs).toBe(0);
    expect(h.flow.outputsFull()).toBe(false);
    expect(sentOffsets(h.backend)).toEqual([0, 1, 4, 2, 3, 5, 6, 7, 8, 9]); // by key, each key's in order
  });

  test('dead letters count too', async () => {
    const refuses: Fold<number, string> = (s, r) => {
      if (r.value === 'bad') throw new Error('bad');
      return (s ?? 0) + 1;
    };
    const h = await harness<number>({ fold: refuses, extra: { onFoldFailure: 'dead-letter', deadLetterTopic: 'dlq', maxPendingOutputs: 2 } });
    await h.flow.handleBatch(records('k', 0, ['bad', 'ok', 'bad']));
    expect(h.flow.pendingOutputs).toBe(2);
    expect(h.flow.outputsFull()).toBe(true);
  });

  test('outputs in a write in flight still count, and what is emitted meanwhile adds to them', async () => {
    const backend = new InMemoryBackend<number, string>();
    const g = gated(backend.forPartition(TP, 'snapshots'));
    const h = await harness<number>({ fold: echo, backend, persistence: g.persistence, timers: slowTimers, extra: { outputs, maxPendingOutputs: 4 } });
    await h.flow.handleBatch(records('a', 0, ['x', 'x', 'x']));
    const persisting = h.flow.persist(h.clock.now(), 'outputs');
    while (g.state.waiting === 0) await new Promise((r) => setImmediate(r));
    expect(h.flow.pendingOutputs).toBe(3); // taken off the key, not landed yet
    await h.flow.handleBatch(records('b', 3, ['x']));
    expect(h.flow.pendingOutputs).toBe(4);
    expect(h.flow.outputsFull()).toBe(true);
    g.release();
    await persisting;
    expect(h.flow.pendingOutputs).toBe(1); // b's, emitted after the persist was planned
    expect(sentOffsets(backend)).toEqual([0, 1, 2]);
  });

  test('a write that fails keeps its outputs counted (ignorePersistErrors): still full, nothing lost or reordered once it lands', async () => {
    const backend = new InMemoryBackend<number, string>();
    const g = gated(backend.forPartition(TP, 'snapshots'));
    const h = await harness<number>({
      fold: echo,
      backend,
      persistence: g.persistence,
      timers: { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE, ignorePersistErrors: true } },
      extra: { outputs, maxPendingOutputs: 2 },
    });
    await h.flow.handleBatch(records('a', 0, ['x', 'x']));
    g.state.failing = true;
    expect(await h.flow.persist(h.clock.now(), 'outputs')).toMatchObject({ failed: 1, outputs: 0 });
    expect(h.flow.pendingOutputs).toBe(2);
    expect(h.flow.outputsFull()).toBe(true);
    g.state.failing = false;
    await h.flow.handleBatch(records('a', 2, ['x']));
    const landing = h.flow.persist(h.clock.now(), 'outputs');
    while (g.state.waiting === 0) await new Promise((r) => setImmediate(r));
    g.release();
    expect(await landing).toMatchObject({ outputs: 3 });
    expect(h.flow.pendingOutputs).toBe(0);
    expect(sentOffsets(backend)).toEqual([0, 1, 2]);
  });

  test('a stopped partition is never full (nothing more will land: the owner must not wait for it)', async () => {
    const backend = new InMemoryBackend<number, string>();
    const g = gated(backend.forPartition(TP, 'snapshots'));
    const h = await harness<number>({ fold: echo, backend, persistence: g.persistence, timers: slowTimers, extra: { outputs, maxPendingOutputs: 1 } });
    await h.flow.handleBatch(records('a', 0, ['x']));
    expect(h.flow.outputsFull()).toBe(true);
    g.state.failing = true;
    await expect(h.flow.persist(h.clock.now(), 'outputs')).rejects.toThrow(PersistFailedError); // its cause withheld: a plain Error may quote the state
    expect(h.flow.failed).toBeDefined();
    expect(h.flow.outputsFull()).toBe(false);
    expect(h.flow.outputsDue(h.clock.now() + MINUTE)).toBe(false);
  });

  test('unbounded without the option; a bound that is not a positive integer is refused', async () => {
    const h = await harness<number>({ fold: echo, timers: slowTimers, extra: { outputs } });
    await h.flow.handleBatch(records('a', 0, Array.from({ length: 50_000 }, () => 'x')));
    expect(h.flow.pendingOutputs).toBe(50_000);
    expect(h.flow.outputsFull()).toBe(false);
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      await expect(harness<number>({ fold: echo, extra: { outputs, maxPendingOutputs: bad } })).rejects.toThrow(PartitionStateError);
    }
  });
});
