// Recovered snapshots handed over undecoded (LazySnapshot): the engine decodes a key's state when
// the key is first used — its first record past the snapshot's offset, or a read of its state —
// never at recovery, and keys nobody touches are neither decoded nor written. A snapshot that does
// not decode stops the partition at that key's first record, with the CorruptSnapshotError, before
// the record is taken: nothing is committed past it.
import { CorruptSnapshotError } from '../../../core/codec/errors';
import type { KeyWrite, LazySnapshot, PartitionPersistence, RecoveredKey, WriteBatch, WriteBatchResult } from '../../../flow/ports';
import { type Count, countingFold, harness, MINUTE, records } from './harness';

interface Stored {
  readonly offset: number;
  readonly state?: Count;
  /** Its bytes do not decode. */
  readonly corrupt?: boolean;
}

/** A backend whose recovered snapshots are lazy, counting the decodes. */
class LazyPersistence implements PartitionPersistence<Count, string> {
  readonly maxWritesPerBatch = 100;
  readonly decoded: string[] = [];
  readonly written: KeyWrite<Count, string>[] = [];
  committed: number | undefined;

  constructor(private readonly stored: Map<string, Stored>) {}

  async *recover(): AsyncIterable<RecoveredKey<Count, string>> {
    for (const key of this.stored.keys()) yield (await this.read(key))!;
  }

  async read(key: string): Promise<RecoveredKey<Count, string> | undefined> {
    const stored = this.stored.get(key);
    return stored ? { key, snapshot: this.lazy(key, stored) } : undefined;
  }

  async write(batch: WriteBatch<Count, string>): Promise<WriteBatchResult> {
    this.written.push(...batch.writes);
    if (batch.commitOffset !== undefined) this.committed = batch.commitOffset;
    return { statuses: batch.writes.map(() => 'applied'), committed: batch.commitOffset !== undefined };
  }

  private lazy(key: string, stored: Stored): LazySnapshot<Count> {
    const decoded = this.decoded;
    return {
      lazy: true,
      offset: stored.offset,
      get state(): Count {
        decoded.push(key);
        if (stored.corrupt) throw new CorruptSnapshotError({ topic: 'snapshots', partition: 0, key, offset: '7' }, new Error('not JSON'));
        return stored.state!;
      },
    };
  }
}

const fold = countingFold(1_000_000);
const count = (n: number, offset: number): Stored => ({ offset, state: { offset: String(offset), count: n } });

describe('lazily decoded recovery', () => {
  it('decodes a key at its first record past the snapshot, not at recovery; untouched keys are neither decoded nor written', async () => {
    const persistence = new LazyPersistence(new Map([['a', count(2, 5)], ['b', count(3, 5)], ['c', count(4, 5)]]));
    const h = await harness({ fold, persistence, assignedAt: 3 });
    expect(persistence.decoded).toEqual([]);
    expect(h.flow.liveKeys).toBe(3);

    // A replayed record at or below the snapshot is skipped without decoding.
    await h.flow.handleBatch(records('a', 3, ['x', 'y', 'z']));
    expect(persistence.decoded).toEqual([]);
    await h.flow.handleBatch(records('a', 6, ['w']));
    expect(persistence.decoded).toEqual(['a']);
    expect(h.flow.stateOf('a')).toEqual({ offset: '6', count: 3 });

    // Timers and a periodic persist run over every key: only the folded one is written, nothing else decoded.
    h.clock.advance(MINUTE);
    h.flow.triggerTimers();
    const persisted = await h.flow.persist(h.clock.now(), 'periodic');
    expect(persisted).toMatchObject({ written: 1, committed: 7 });
    expect(persistence.written.map((w) => w.key)).toEqual(['a']);
    expect(await h.flow.persist(h.clock.now(), 'shutdown')).toMatchObject({ written: 0 });
    expect(persistence.decoded).toEqual(['a']);

    // A read of a key's state decodes it.
    expect(h.flow.stateOf('b')).toEqual({ offset: '5', count: 3 });
    expect([...h.flow.states()].map(([k]) => k).sort()).toEqual(['a', 'b', 'c']);
    expect(persistence.decoded).toEqual(['a', 'b', 'c']);
  });

  it('a snapshot that does not decode stops the partition at its key\'s first record, before taking it; nothing is committed past it', async () => {
    const persistence = new LazyPersistence(new Map([['good', count(1, 5)], ['bad', { offset: 5, corrupt: true }]]));
    const h = await harness({ fold, persistence, assignedAt: 10 });

    // Until a record for it comes, the partition runs and commits: the bad key is never decoded.
    await h.flow.handleBatch(records('good', 10, ['x']));
    h.clock.advance(MINUTE);
    expect(await h.flow.persist(h.clock.now(), 'periodic')).toMatchObject({ written: 1, committed: 11 });
    expect(persistence.decoded).toEqual(['good']);

    const batch = [...records('other', 11, ['x']), ...records('bad', 12, ['y']), ...records('later', 13, ['z'])];
    const error = (() => {
      try {
        h.flow.handleBatch(batch);
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(CorruptSnapshotError);
    expect(error).toMatchObject({ code: 'CORRUPT_SNAPSHOT', topic: 'snapshots', partition: 0, offset: '7', key: 'bad' });
    expect(h.flow.failed).toBe(error);
    // The bad key's record was not taken, nor anything after it; a later persist refuses to run.
    expect(h.flow.position).toBe(11);
    expect(h.flow.stateOf('later')).toBeUndefined();
    await expect(h.flow.persist(h.clock.now(), 'periodic')).rejects.toBe(error);
    expect(persistence.committed).toBe(11);
    expect(() => h.flow.handleBatch(records('good', 14, ['w']))).toThrow(error as Error);
  });

  it('a key unloaded undecoded is read back lazily; a read-back that does not decode stops the partition', async () => {
    const persistence = new LazyPersistence(new Map([['a', count(1, 5)], ['bad', { offset: 5, corrupt: true }]]));
    const h = await harness({ fold, persistence, assignedAt: 6, timers: { unloadOrphaned: { fireEvery: 0, maxOffsetDifference: 1 } } });
    await h.flow.handleBatch(records('x', 6, ['1', '2', '3']));
    h.flow.triggerTimers();
    expect(await h.flow.persist(h.clock.now(), 'periodic')).toMatchObject({ evicted: 2 });
    expect(h.flow.liveKeys).toBe(1);
    expect(persistence.decoded).toEqual([]);

    await h.flow.handleBatch(records('a', 9, ['y']));
    expect(h.flow.stateOf('a')).toEqual({ offset: '9', count: 2 });
    await expect(h.flow.handleBatch(records('bad', 10, ['z']))).rejects.toBeInstanceOf(CorruptSnapshotError);
    expect(h.flow.failed).toBeInstanceOf(CorruptSnapshotError);
    expect(persistence.decoded).toEqual(['a', 'bad']);
  });

  it('a read of a state that does not decode stops the partition too', async () => {
    const persistence = new LazyPersistence(new Map([['bad', { offset: 5, corrupt: true }]]));
    const h = await harness({ fold, persistence, assignedAt: 6 });
    expect(() => h.flow.stateOf('bad')).toThrow(CorruptSnapshotError);
    expect(h.flow.failed).toBeInstanceOf(CorruptSnapshotError);
  });
});
