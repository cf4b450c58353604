// Records a fold emits (ctx.emit): held on the key, written with its next write (in the same
// batch as its snapshot and the offset commit), never re-emitted for records a snapshot covers,
// discarded with a record whose fold threw, and due within outputEvery whatever persistEvery says.
import { jsonCodec } from '../../../core/codec/json';
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { PersistFailedError } from '../../../flow/errors';
import { type Fold, handleErrorWith } from '../../../flow/fold';
import { InMemoryBackend } from '../../../persistence/memory';
import { harness, MINUTE, records, TP } from './harness';

const outputs = { topics: new Set(['alerts', 'other']), encoder: jsonCodec<unknown>() };

/** Sums numeric values; emits an alert (keyed by the input key) each time the total crosses a multiple of 10. */
const alerting: Fold<number, string> = (s, r, ctx) => {
  const before = s ?? 0;
  const after = before + Number(r.value);
  if (Number.isNaN(after)) throw new Error(`not a number: ${r.value}`);
  if (Math.floor(after / 10) > Math.floor(before / 10)) ctx.emit({ topic: 'alerts', key: r.key, value: { total: after, at: r.offset } });
  return after;
};

const slowTimers = { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE } };

const values = (sent: InMemoryBackend<number, string>['outputs']['sent']) => sent.map((o) => JSON.parse(String(o.value)));

describe('emitted outputs (ctx.emit)', () => {
  test('an emit travels with its key\'s write: same batch as the snapshot past its record, counted once it lands', async () => {
    const h = await harness<number>({ fold: alerting, timers: slowTimers, extra: { outputs } });
    await h.flow.handleBatch(records('k', 0, ['4', '7', '1', '5']));
    expect(h.backend.outputs.sent).toHaveLength(0); // held on the key until its write
    const r = await h.flow.persist(h.clock.now(), 'periodic'); // due though persistEvery has not passed
    expect(r).toMatchObject({ written: 1, outputs: 1, committed: 4 });
    expect(values(h.backend.outputs.sent)).toEqual([{ total: 11, at: '1' }]);
    expect(h.backend.outputs.sent[0]).toMatchObject({ kind: 'emitted', topic: 'alerts', key: 'k', headers: { [OUTPUT_SOURCE_HEADER]: `${TP.topic}/0/1/0` } });
    expect(await h.backend.snapshots.read(TP, 'k')).toEqual({ state: 17, offset: 3 });
    expect(await h.metrics.registry.getSingleMetricAsString('kafka_flow_outputs_total')).toMatch(/output_topic="alerts"\} 1/);
  });

  test('two-argument folds, several emits per record (indexed), and headers kept', async () => {
    const twoArgs: Fold<number, string> = (s, r) => (s ?? 0) + Number(r.value);
    const plain = await harness<number>({ fold: twoArgs });
    await plain.step(records('k', 0, ['1', '2']));
    expect(plain.flow.stateOf('k')).toBe(3);

    const many: Fold<number, string> = (s, _r, ctx) => {
      ctx.emit({ topic: 'alerts', key: null, value: 'a', headers: { trace: 'x' } });
      ctx.emit({ topic: 'other', key: 'z', value: null });
      return s;
    };
    const h = await harness<number>({ fold: many, extra: { outputs } });
    await h.flow.handleBatch(records('k', 5, ['x']));
    const r = await h.flow.persist(h.clock.now(), 'periodic');
    // The state never changed (undefined): the key is still written, so its snapshot's offset passes the record.
    expect(r.outputs).toBe(2);
    expect(h.backend.outputs.sent.map((o) => [o.topic, o.key, o.value === null ? null : String(o.value), o.headers])).toEqual([
      ['alerts', null, '"a"', { trace: 'x', [OUTPUT_SOURCE_HEADER]: `${TP.topic}/0/5/0` }],
      ['other', 'z', null, { [OUTPUT_SOURCE_HEADER]: `${TP.topic}/0/5/1` }],
    ]);
  });

  test('a key whose state is unchanged by an emitting record is still written past it (no re-emit on replay)', async () => {
    const backend = new InMemoryBackend<number, string>();
    const echo: Fold<number, string> = (s, r, ctx) => {
      ctx.emit({ topic: 'alerts', key: r.key, value: r.value });
      return s ?? 1;
    };
    const h = await harness<number>({ fold: echo, backend, extra: { outputs } });
    await h.flow.handleBatch(records('k', 0, ['a']));
    await h.flow.persist(h.clock.now(), 'periodic');
    await h.flow.handleBatch(records('k', 1, ['b'])); // state stays 1
    const r = await h.flow.persist(h.clock.now(), 'periodic');
    expect(r).toMatchObject({ written: 1, outputs: 1 });
    expect(await backend.snapshots.read(TP, 'k')).toEqual({ state: 1, offset: 1 });
  });

  test('records at or below a recovered snapshot\'s offset are skipped on replay: their outputs are not emitted again', async () => {
    const backend = new InMemoryBackend<number, string>();
    const first = await harness<number>({ fold: alerting, backend, extra: { outputs } });
    await first.flow.handleBatch(records('k', 0, ['6', '6']));
    await first.flow.persist(first.clock.now(), 'periodic');
    expect(values(backend.outputs.sent)).toEqual([{ total: 12, at: '1' }]);
    // Another key holds the committed offset back, so the next owner replays from offset 0.
    await first.flow.handleBatch(records('other', 2, ['1']));
    expect(backend.committer.committed(TP)).toBe(2);

    const second = await harness<number>({ fold: alerting, backend, extra: { outputs }, assignedAt: 0 });
    await second.flow.handleBatch([...records('k', 0, ['6', '6']), ...records('other', 2, ['1']), ...records('k', 3, ['9'])]);
    const r = await second.flow.persist(second.clock.now(), 'periodic');
    expect(r.outputs).toBe(1);
    expect(values(backend.outputs.sent)).toEqual([{ total: 12, at: '1' }, { total: 21, at: '3' }]);
  });

  test('a record whose fold throws takes its emits with it (skip, dead-letter, handleErrorWith)', async () => {
    const emitsThenThrows: Fold<number, string> = (s, r, ctx) => {
      ctx.emit({ topic: 'alerts', key: r.key, value: `before ${r.value}` });
      if (r.value === 'boom') throw new Error('boom');
      return (s ?? 0) + 1;
    };
    const skip = await harness<number>({ fold: emitsThenThrows, extra: { outputs, onFoldFailure: 'skip' } });
    await skip.flow.handleBatch(records('k', 0, ['a', 'boom', 'b']));
    await skip.flow.persist(skip.clock.now(), 'periodic');
    expect(values(skip.backend.outputs.sent)).toEqual(['before a', 'before b']);

    const dl = await harness<number>({ fold: emitsThenThrows, extra: { outputs, onFoldFailure: 'dead-letter', deadLetterTopic: 'dlq' } });
    await dl.flow.handleBatch(records('k', 0, ['boom', 'a']));
    const r = await dl.flow.persist(dl.clock.now(), 'periodic');
    expect(r).toMatchObject({ outputs: 1, deadLetters: 1 });
    expect(dl.backend.outputs.sent.map((o) => [o.topic, o.kind ?? 'dead-letter'])).toEqual([
      ['dlq', 'dead-letter'],
      ['alerts', 'emitted'],
    ]);

    const handled = handleErrorWith(emitsThenThrows, (s, _e, r, ctx) => {
      ctx.emit({ topic: 'other', key: r.key, value: 'handled' });
      return s;
    });
    const hh = await harness<number>({ fold: handled, extra: { outputs } });
    await hh.flow.handleBatch(records('k', 0, ['boom']));
    await hh.flow.persist(hh.clock.now(), 'periodic');
    expect(hh.backend.outputs.sent.map((o) => [o.topic, JSON.parse(String(o.value))])).toEqual([['other', 'handled']]);
  });

  test('async folds: each key collects its own emits; a rejected fold emits nothing', async () => {
    const slow: Fold<number, string> = async (s, r, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, r.key === 'a' ? 5 : 1));
      ctx.emit({ topic: 'alerts', key: r.key, value: r.value });
      if (r.value === 'boom') throw new Error('boom');
      return (s ?? 0) + 1;
    };
    const h = await harness<number>({ fold: slow, extra: { outputs, onFoldFailure: 'skip' } });
    await h.flow.handleBatch([...records('a', 0, ['a0']), ...records('b', 1, ['b1', 'boom'])]);
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.backend.outputs.sent.map((o) => [o.key, JSON.parse(String(o.value))]).sort()).toEqual([
      ['a', 'a0'],
      ['b', 'b1'],
    ]);
  });

  test('an emit to an undeclared topic, or with no outputTopics, is a fold failure', async () => {
    const stray: Fold<number, string> = (s, r, ctx) => {
      ctx.emit({ topic: 'nowhere', key: r.key, value: 1 });
      return s;
    };
    const h = await harness<number>({ fold: stray, extra: { outputs } });
    expect(() => h.flow.handleBatch(records('k', 0, ['x']))).toThrow(/topic "nowhere" is not one of the flow's outputTopics/);
    const none = await harness<number>({ fold: stray });
    expect(() => none.flow.handleBatch(records('k', 0, ['x']))).toThrow(/declares no outputTopics/);
  });

  test('outputEvery: pending outputs are due that long after the first, and an outputs persist writes only those keys', async () => {
    const h = await harness<number>({ fold: alerting, timers: slowTimers, extra: { outputs, outputEvery: 1000 } });
    const t0 = h.clock.now();
    await h.flow.handleBatch([...records('quiet', 0, ['1']), ...records('loud', 1, ['20'])]);
    expect(h.flow.outputsDue(t0 + 999)).toBe(false);
    expect(h.flow.outputsDue(t0 + 1000)).toBe(true);
    const r = await h.flow.persist(t0 + 1000, 'outputs');
    expect(r).toMatchObject({ written: 1, outputs: 1, committed: undefined }); // 'quiet' still holds offset 0
    expect(await h.backend.snapshots.read(TP, 'quiet')).toBeUndefined();
    expect(h.flow.outputsDue(t0 + 10 * MINUTE)).toBe(false); // nothing pending any more
    await h.flow.handleBatch(records('loud', 2, ['20']));
    expect(h.flow.outputsDue(h.clock.now() + 1000)).toBe(true);
  });

  test('an outputs persist whose write fails keeps the outputs for the next write, in order, and fails the partition', async () => {
    const backend = new InMemoryBackend<number, string>();
    const base = backend.forPartition(TP, 'snapshots');
    let failNext = true;
    const flaky = {
      maxWritesPerBatch: base.maxWritesPerBatch,
      recover: () => base.recover(),
      read: (key: string) => base.read(key),
      write: async (batch: Parameters<typeof base.write>[0]) => {
        if (failNext && batch.writes.length > 0) {
          failNext = false;
          throw new Error('broker away');
        }
        return base.write(batch);
      },
    };
    const h = await harness<number>({ fold: alerting, backend, persistence: flaky, timers: { persistPeriodically: { ignorePersistErrors: true } }, extra: { outputs } });
    await h.flow.handleBatch(records('k', 0, ['10']));
    expect((await h.flow.persist(h.clock.now(), 'outputs')).failed).toBe(1);
    expect(h.flow.outputsDue(h.clock.now() + 1000)).toBe(true);
    await h.flow.handleBatch(records('k', 1, ['10']));
    const r = await h.flow.persist(h.clock.now(), 'outputs');
    expect(r).toMatchObject({ written: 1, outputs: 2 });
    expect(values(backend.outputs.sent).map((v) => v.at)).toEqual(['0', '1']);

    const empty = new InMemoryBackend<number, string>().forPartition(TP, 'snapshots');
    const down = { ...flaky, recover: () => empty.recover(), write: async () => Promise.reject(new Error('broker away')) };
    const strict = await harness<number>({ fold: alerting, persistence: down, extra: { outputs } });
    await strict.flow.handleBatch(records('k', 0, ['10']));
    await expect(strict.flow.persist(strict.clock.now(), 'outputs')).rejects.toThrow(PersistFailedError); // its cause withheld: a plain Error may quote the state
    expect(strict.flow.failed).toBeDefined();
  });
});
