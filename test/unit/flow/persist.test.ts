// The persist path beyond kafka-flow's specs: chunked writes whose commit never leads them, fences,
// offset-gated conflicts, decode-failure policies, async folds and unloaded keys read back.
import type { OutputRecord } from '../../../core/persistence-types';
import { DEAD_LETTER_HEADERS } from '../../../flow/poison';
import type { KeyWrite } from '../../../flow/ports';
import type { Codec } from '../../../core/codec/codec';
import { DecodeError } from '../../../core/codec/errors';
import { FoldError } from '../../../flow/errors';
import type { Fold } from '../../../flow/fold';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../../../core/fence-errors';
import { InMemoryBackend } from '../../../persistence/memory';
import type { PartitionPersistence, WriteBatch } from '../../../flow/ports';
import { type Count, countingFold, harness, MINUTE, records, TP } from './harness';

function spy<S, V>(inner: PartitionPersistence<S, V>) {
  const batches: { keys: string[]; commitOffset: number | undefined }[] = [];
  const wrapped: PartitionPersistence<S, V> = {
    maxWritesPerBatch: inner.maxWritesPerBatch,
    recover: () => inner.recover(),
    read: (key) => inner.read(key),
    write(batch: WriteBatch<S, V>) {
      batches.push({ keys: batch.writes.map((w) => w.key), commitOffset: batch.commitOffset });
      return inner.write(batch);
    },
  };
  return { wrapped, batches };
}

const fenced = (): PartitionPersistence<Count, string> => ({
  maxWritesPerBatch: 10,
  recover: async function* () {},
  read: async () => undefined,
  write: async () => {
    throw new SnapshotWriteFencedError(TP.topic, TP.partition, 'generation 3 is newer');
  },
});

describe('PartitionFlow persist', () => {
  test('a key written again after its delete marker landed (or recovered as one) is listed again (addKey): another engine may have purged the marker and unlisted it meanwhile', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const addKeys: Array<[string, string, boolean]> = [];
    const watched = (inner: PartitionPersistence<Count, string>): PartitionPersistence<Count, string> => ({
      maxWritesPerBatch: inner.maxWritesPerBatch,
      recover: () => inner.recover(),
      read: (key) => inner.read(key),
      write(batch: WriteBatch<Count, string>) {
        for (const w of batch.writes) addKeys.push([w.key, w.snapshot ? 'put' : w.delete ? 'delete' : 'purge', w.addKey === true]);
        return inner.write(batch);
      },
    });
    // countingFold(2): the first record creates the key, the second deletes it, the third creates it again.
    const h = await harness({ fold: countingFold(2), backend, persistence: watched(backend.forPartition(TP, 'snapshots')) });
    for (const offset of [0, 1, 2]) {
      await h.flow.handleBatch(records('a', offset, ['e']));
      await h.flow.persist(h.clock.now(), 'idle');
    }
    expect(addKeys).toEqual([
      ['a', 'put', true],
      ['a', 'delete', false],
      ['a', 'put', true],
    ]);

    // Recovered as a marker: written again, listed again.
    const h2 = await harness({ fold: countingFold(2), backend, persistence: watched(backend.forPartition(TP, 'snapshots')) });
    addKeys.length = 0;
    await h2.flow.handleBatch(records('a', 3, ['e'])); // deletes it: a marker at 3
    await h2.flow.persist(h2.clock.now(), 'idle');
    const h3 = await harness({ fold: countingFold(2), backend, persistence: watched(backend.forPartition(TP, 'snapshots')), assignedAt: 3 });
    await h3.flow.handleBatch(records('a', 4, ['e']));
    await h3.flow.persist(h3.clock.now(), 'idle');
    expect(addKeys).toEqual([
      ['a', 'delete', false],
      ['a', 'put', true],
    ]);
  });

  test('a batch handed again from below the position (the consumer seeked back while the batch folded on) folds nothing again: a key deleted in it, its delete landed and forgotten, is not created afresh from its older records', async () => {
    // The store is not asked about a key the engine does not hold (no has / readNow: Cassandra's
    // snapshots), so only the position can tell that these records were folded already.
    const backend = new InMemoryBackend<Count, string>();
    const { wrapped, batches } = spy(backend.forPartition(TP, 'snapshots'));
    const h = await harness({ fold: countingFold(3), backend, persistence: wrapped });
    const batch = [...records('a', 0, ['e', 'e']), ...records('b', 2, ['e']), ...records('a', 3, ['e'])]; // a: created at 0, deleted at 3
    await h.flow.handleBatch(batch);
    await h.flow.persist(h.clock.now(), 'idle'); // a's delete marker lands with the commit past it
    await h.flow.persist(h.clock.now(), 'idle'); // the marker is purged; a is forgotten
    expect(h.flow.liveKeys).toBe(1);
    const written = batches.length;

    await h.flow.handleBatch(batch.slice(0, 2)); // a's records before its delete, again
    expect([...h.flow.states()]).toEqual([['b', { offset: '2', count: 1 }]]);
    await h.flow.handleBatch([...batch.slice(2), ...records('b', 4, ['e'])]); // from below the position, past it at the end
    expect(h.flow.position).toBe(5);
    expect([...h.flow.states()]).toEqual([['b', { offset: '4', count: 2 }]]);
    await h.flow.persist(h.clock.now(), 'idle');
    expect(batches.slice(written).map((b) => b.keys)).toEqual([['b']]);
  });

  test('a periodic persist takes every key whose persistEvery has passed, even before its timer fired again: the commit trails by one cycle', async () => {
    // Timers every 1 s, persist every 1 s, the workflow's persists at 1.0, 2.1 and 3.2 s (their own clock).
    const h = await harness({ fold: countingFold(100), timers: { persistPeriodically: { fireEvery: 1000, persistEvery: 1000 } } });
    const t0 = h.clock.now();
    await h.flow.handleBatch(records('a', 0, ['e']));
    h.flow.triggerTimers(t0 + 1000); // a's timer fires at 1.0 s: due
    await h.flow.persist(t0 + 1000, 'periodic');
    expect(h.committed()).toBe(1);
    await h.flow.handleBatch(records('a', 1, ['e']));
    h.flow.triggerTimers(t0 + 2000); // fires at 2.0 s: only 1.0 s since the persist at 1.0 s... due, but
    await h.flow.persist(t0 + 2100, 'periodic');
    expect(h.committed()).toBe(2);
    await h.flow.handleBatch(records('a', 2, ['e']));
    h.flow.triggerTimers(t0 + 3000); // 0.9 s after the persist at 2.1 s: not due by its timer
    await h.flow.persist(t0 + 3200, 'periodic'); // 1.1 s after it: persisted all the same
    expect(h.committed()).toBe(3);
    // Never more often than persistEvery.
    await h.flow.handleBatch(records('a', 3, ['e']));
    await h.flow.persist(t0 + 3900, 'periodic');
    expect(h.committed()).toBe(3);
  });

  test('an idle persist writes every dirty key at once, due or not, and commits the position; it fails like a periodic one', async () => {
    const h = await harness({ fold: countingFold(100), timers: { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE } } });
    const t0 = h.clock.now();
    await h.flow.handleBatch([...records('a', 0, ['e', 'e']), ...records('b', 2, ['e'])]);
    expect(await h.flow.persist(t0 + 10, 'periodic')).toMatchObject({ written: 0 }); // not due for a minute
    expect(h.committed()).toBeUndefined();
    expect(await h.flow.persist(t0 + 20, 'idle')).toMatchObject({ written: 2, committed: 3, failed: 0 });
    expect(h.committed()).toBe(3);
    expect(await h.backend.snapshots.read(TP, 'a')).toMatchObject({ offset: 1 });
    // Nothing dirty: nothing written, nothing more to commit.
    expect(await h.flow.persist(t0 + 30, 'idle')).toMatchObject({ written: 0, committed: undefined });

    const f = await harness<Count>({ fold: countingFold(100), persistence: fenced() });
    await f.flow.handleBatch(records('a', 0, ['e']));
    await expect(f.flow.persist(f.clock.now(), 'idle')).rejects.toBeInstanceOf(SnapshotWriteFencedError);
    expect(f.flow.failed).toBeInstanceOf(SnapshotWriteFencedError);
  });

  test('a takeover persist (a recovered partition\'s first batch) writes every dirty key at once and commits the position; it fails like a periodic one', async () => {
    const h = await harness({ fold: countingFold(100), timers: { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE } } });
    const t0 = h.clock.now();
    await h.flow.handleBatch([...records('a', 0, ['e', 'e']), ...records('b', 2, ['e'])]);
    expect(await h.flow.persist(t0 + 10, 'takeover')).toMatchObject({ written: 2, committed: 3, failed: 0 });
    expect(h.committed()).toBe(3);
    expect(await h.backend.snapshots.read(TP, 'b')).toMatchObject({ offset: 2 });

    const f = await harness<Count>({ fold: countingFold(100), persistence: fenced() });
    await f.flow.handleBatch(records('a', 0, ['e']));
    await expect(f.flow.persist(f.clock.now(), 'takeover')).rejects.toBeInstanceOf(SnapshotWriteFencedError);
    expect(f.flow.failed).toBeInstanceOf(SnapshotWriteFencedError);
  });

  test('an idle persist of a transient flow writes nothing and commits nothing (as a periodic one)', async () => {
    const h = await harness({ fold: countingFold(100), mode: 'none', timers: { persistPeriodically: { fireEvery: MINUTE, persistEvery: MINUTE } } });
    await h.flow.handleBatch(records('a', 0, ['e']));
    expect(await h.flow.persist(h.clock.now(), 'idle')).toMatchObject({ written: 0, committed: undefined });
    expect(h.committed()).toBeUndefined();
  });

  test('group-commits in chunks, each carrying an offset that never leads the writes not yet landed', async () => {
    const backend = new InMemoryBackend<Count, string>();
    const { wrapped, batches } = spy(backend.forPartition(TP, 'snapshots', 2));
    const h = await harness({ fold: countingFold(100), backend, persistence: wrapped });
    await h.flow.handleBatch(['k0', 'k1', 'k2', 'k3', 'k4'].flatMap((k, i) => records(k, i, ['e'])));
    const result = await h.flow.persist(h.clock.now(), 'shutdown');
    expect(batches).toEqual([
      { keys: ['k0', 'k1'], commitOffset: 2 },
      { keys: ['k2', 'k3'], commitOffset: 4 },
      { keys: ['k4'], commitOffset: 5 },
    ]);
    expect(result).toMatchObject({ committed: 5, written: 5, failed: 0 });
    expect(backend.committer.history.map((c) => c.offset)).toEqual([2, 4, 5]);
  });

  test('a fenced periodic persist stops the partition with SnapshotWriteFencedError', async () => {
    const h = await harness({ fold: countingFold(100), persistence: fenced(), timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0, ignorePersistErrors: true } } });
    const error = await h.step(records('k', 0, ['e'])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SnapshotWriteFencedError);
    expect((error as SnapshotWriteFencedError).code).toBe('FENCED');
    expect(() => h.flow.handleBatch(records('k', 1, ['e']))).toThrow(SnapshotWriteFencedError);
  });

  test('a fenced flush on revoke is reported, not thrown', async () => {
    const h = await harness({ fold: countingFold(100), persistence: fenced(), timers: { persistPeriodically: { flushOnRevoke: true } } });
    await h.flow.handleBatch(records('k', 0, ['e']));
    await expect(h.flow.persist(h.clock.now(), 'revoke')).resolves.toMatchObject({ fenced: true, written: 0, committed: undefined });
  });

  test('an offset-gated store refuses a stale write: SnapshotWriteConflictError stops the partition, ignorePersistErrors or not (a refusal is a fence)', async () => {
    for (const ignorePersistErrors of [false, true]) {
      const backend = new InMemoryBackend<Count, string>({ offsetGated: true });
      const h = await harness({ fold: countingFold(100), backend, timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0, ignorePersistErrors } } });
      // Another owner already wrote this key at a newer offset.
      backend.snapshots.set(TP, 'k', { state: { offset: '50', count: 9 }, offset: 50 });
      const outcome = await h.step(records('k', 0, ['e'])).then(
        () => 'ok',
        (e: unknown) => e,
      );
      expect(outcome).toBeInstanceOf(SnapshotWriteConflictError);
      expect((outcome as SnapshotWriteConflictError).keys).toEqual(['k']);
      expect(h.flow.failed).toBe(outcome);
      expect(h.committed()).toBeUndefined();
      expect(backend.snapshots.entries(TP).get('k')?.offset).toBe(50);
    }
  });

  test('a refused write in a flush on revoke stops the partition too: its outputs, produced once before the refusal, are not produced again', async () => {
    const backend = new InMemoryBackend<Count, string>({ offsetGated: true });
    const outputs = { topics: new Set(['out']), encoder: { encode: (v: unknown) => Buffer.from(String(v)) } };
    const echo: Fold<Count, string> = (s, r, ctx) => {
      ctx.emit({ topic: 'out', key: r.key, value: r.offset });
      return { offset: r.offset, count: (s?.count ?? 0) + 1 };
    };
    const h = await harness<Count>({ fold: echo, backend, timers: { persistPeriodically: { flushOnRevoke: true } }, extra: { outputs } });
    backend.snapshots.set(TP, 'k', { state: { offset: '50', count: 9 }, offset: 50 }); // the newer owner's
    await h.flow.handleBatch([...records('k', 0, ['e', 'e']), ...records('other', 2, ['e'])]);
    const r = await h.flow.persist(h.clock.now(), 'revoke');
    expect(r).toMatchObject({ fenced: true, committed: undefined });
    expect(h.flow.failed).toBeInstanceOf(SnapshotWriteConflictError);
    expect(backend.outputs.sent.filter((o) => o.key === 'k').map((o) => String(o.value))).toEqual(['0', '1']);
    // Leaving the group flushes again: the stopped partition writes (and produces) nothing more.
    await expect(h.flow.persist(h.clock.now(), 'shutdown')).rejects.toBeInstanceOf(SnapshotWriteConflictError);
    await expect(h.flow.persist(h.clock.now(), 'outputs')).rejects.toBeInstanceOf(SnapshotWriteConflictError);
    expect(backend.outputs.sent.filter((o) => o.key === 'k')).toHaveLength(2);
  });

  test('an unloaded orphan is read back from the store when its key comes again', async () => {
    const h = await harness({ fold: countingFold(100), timers: { unloadOrphaned: { fireEvery: 0, maxOffsetDifference: 2 } } });
    await h.step(records('k', 0, ['a', 'b']));
    await h.step(records('other', 2, ['x', 'y', 'z']));
    expect(h.flow.stateOf('k')).toBeUndefined();
    expect(h.backend.snapshots.entries(TP).get('k')).toEqual({ state: { offset: '1', count: 2 }, offset: 1 });
    const pending = h.flow.handleBatch(records('k', 5, ['c']));
    expect(pending).toBeInstanceOf(Promise);
    await pending;
    expect(h.flow.stateOf('k')).toEqual({ offset: '5', count: 3 });
  });

  test('folds with an async fold, in offset order per key', async () => {
    const seen: string[] = [];
    const h = await harness<string>({
      fold: async (s, r) => {
        await new Promise((resolve) => setTimeout(resolve, r.key === 'a' ? 2 : 0));
        seen.push(`${r.key}${r.offset}`);
        return `${s ?? ''}${r.value}`;
      },
    });
    const result = h.flow.handleBatch([...records('a', 0, ['1', '2']), ...records('b', 2, ['3']), ...records('a', 3, ['4'])]);
    expect(result).toBeInstanceOf(Promise);
    await result;
    expect(h.flow.stateOf('a')).toBe('124');
    expect(h.flow.stateOf('b')).toBe('3');
    expect(seen.filter((s) => s.startsWith('a'))).toEqual(['a0', 'a1', 'a3']);
    expect(h.flow.position).toBe(4);
  });

  test('a throwing fold stops the partition with FoldError', async () => {
    const h = await harness<string>({ fold: () => { throw new Error('bad state'); } });
    expect(() => h.flow.handleBatch(records('k', 7, ['x']))).toThrow(FoldError);
    expect(h.flow.failed).toMatchObject({ code: 'FOLD_FAILED', key: 'k', offset: '7' });
  });

  const picky: Codec<string> = {
    encode: (s) => Buffer.from(s),
    decode: (b) => {
      const s = b.toString();
      if (s === 'bad') throw new Error('not a value');
      return s;
    },
  };

  test('decode failure policy fail: DecodeError with its location', async () => {
    const h = await harness<string>({ fold: (_, r) => r.value, extra: { codec: picky } });
    let error: unknown;
    try {
      h.flow.handleBatch(records('k', 3, ['ok', 'bad']));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DecodeError);
    expect(error).toMatchObject({ topic: 'topic', partition: 0, key: 'k', offset: '4' });
  });

  test('decode failure policy skip: counted, and its offset still commits', async () => {
    const h = await harness<string>({ fold: (_, r) => r.value, extra: { codec: picky, onDecodeFailure: 'skip' }, timers: { persistPeriodically: { fireEvery: 0, persistEvery: 0 } } });
    await h.step(records('k', 0, ['ok', 'bad']));
    expect(h.flow.stateOf('k')).toBe('ok');
    expect(h.committed()).toBe(2);
    expect(await h.metrics.registry.getSingleMetricAsString('kafka_flow_decode_failures_total')).toMatch(/policy="skip"} 1/);
  });

  test('decode failure policy dead-letter: in its key\'s turn, written with the key past it, counted once it lands', async () => {
    const h = await harness<string>({
      fold: (_, r) => r.value,
      extra: { codec: picky, onDecodeFailure: 'dead-letter', deadLetterTopic: 'dlq' },
    });
    const writes: KeyWrite<string, string>[] = [];
    // biome-ignore lint/complexity/useLiteralKeys: the private options, to spy on the persistence they hold
    const persistence = h.flow['o'].persistence;
    const write = persistence.write.bind(persistence);
    persistence.write = (batch) => {
      writes.push(...batch.writes);
      return write(batch);
    };
    await h.flow.handleBatch([...records('k', 0, ['ok', 'bad', 'ok2']), ...records('j', 3, ['bad'])]);
    expect(h.flow.stateOf('k')).toBe('ok2');
    expect(h.flow.stateOf('j')).toBeUndefined();
    const result = await h.flow.persist(h.clock.now(), 'periodic');
    expect(result.deadLetters).toBe(2);
    const k = writes.find((w) => w.key === 'k')!;
    expect(k.snapshot).toEqual({ state: 'ok2', offset: 2 });
    expect(k.outputs).toHaveLength(1);
    expect(k.outputs![0]).toMatchObject({ topic: 'dlq', key: Buffer.from('k'), value: Buffer.from('bad') });
    expect((k.outputs![0] as OutputRecord).headers).toMatchObject({ [DEAD_LETTER_HEADERS.offset]: '1', [DEAD_LETTER_HEADERS.reason]: 'decode', [DEAD_LETTER_HEADERS.topic]: 'topic' });
    // j never had a state: its dead letter travels with a delete marker past offset 3.
    const j = writes.find((w) => w.key === 'j')!;
    expect(j.delete).toEqual({ offset: 3 });
    expect(j.outputs).toHaveLength(1);
    expect(await h.metrics.registry.getSingleMetricAsString('kafka_flow_dead_letters_total')).toMatch(/reason="decode"} 2/);
  });

  test('fold failure policies: skip goes on, dead-letter writes the record with its key, fail stops the partition', async () => {
    const throwing = (s: number | undefined, r: { value: string }) => {
      if (r.value === 'boom') throw new Error('cannot fold boom');
      return (s ?? 0) + 1;
    };
    const skip = await harness<number>({ fold: throwing, extra: { onFoldFailure: 'skip' } });
    await skip.flow.handleBatch(records('k', 0, ['a', 'boom', 'b']));
    expect(skip.flow.stateOf('k')).toBe(2);
    expect(await skip.metrics.registry.getSingleMetricAsString('kafka_flow_fold_failures_total')).toMatch(/policy="skip"} 1/);

    const dl = await harness<number>({ fold: throwing, extra: { onFoldFailure: 'dead-letter', deadLetterTopic: 'dlq' } });
    await dl.flow.handleBatch(records('k', 0, ['a', 'boom', 'b']));
    expect(dl.flow.stateOf('k')).toBe(2);
    const r = await dl.flow.persist(dl.clock.now(), 'shutdown');
    expect(r.deadLetters).toBe(1);
    expect(dl.backend.snapshots.entries(TP).get('k')).toEqual({ state: 2, offset: 2 });

    const fail = await harness<number>({ fold: throwing });
    await expect(Promise.resolve().then(() => fail.flow.handleBatch(records('k', 0, ['a', 'boom'])))).rejects.toMatchObject({ code: 'FOLD_FAILED', offset: '1' });
  });

  test('keyless records are dropped, counted, and move the offset on', async () => {
    const h = await harness({ fold: countingFold(100) });
    await h.flow.handleBatch(records(null, 0, ['a', 'b']));
    expect(h.flow.liveKeys).toBe(0);
    expect(h.flow.offsetToCommit()).toBe(2);
    expect(await h.metrics.registry.getSingleMetricAsString('kafka_flow_keyless_records_dropped_total')).toMatch(/} 2/);
    expect(await h.metrics.registry.getSingleMetricAsString('kafka_flow_keys_live')).toMatch(/} 0/);
  });

  test('the committed offset only moves forward', async () => {
    const h = await harness({ fold: countingFold(100), timers: { persistPeriodically: { persistEvery: MINUTE } } });
    await h.flow.handleBatch(records('k', 0, ['a']));
    await h.flow.persist(h.clock.now(), 'shutdown');
    expect(h.committed()).toBe(1);
    await h.flow.handleBatch(records('j', 1, ['a']));
    await h.flow.persist(h.clock.now(), 'periodic');
    expect(h.flow.offsetToCommit()).toBeUndefined();
    expect(h.backend.committer.history.map((c) => c.offset)).toEqual([1]);
  });
});
