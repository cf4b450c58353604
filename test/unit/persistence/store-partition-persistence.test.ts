import { InMemoryBackend, InMemoryOffsetCommitter, InMemorySnapshotStore } from '../../../persistence/memory';
import { StorePartitionPersistence } from '../../../persistence/store-partition-persistence';
import type { JournalEvent } from '../../../core/persistence-types';

const TP = { topic: 't', partition: 1 };
const event = (key: string, offset: number, value: string): JournalEvent<string> => ({
  topic: 't', partition: 1, offset: String(offset), key, value, timestamp: '0', headers: {},
});

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('StorePartitionPersistence over the in-memory stores', () => {
  test('writes snapshots and keys, then commits, and recovers them', async () => {
    const b = new InMemoryBackend<number, string>();
    const p = b.forPartition(TP, 'snapshots');
    const r = await p.write({ writes: [{ key: 'a', snapshot: { state: 1, offset: 4 }, addKey: true }], commitOffset: 5 });
    expect(r).toEqual({ statuses: ['applied'], committed: true });
    expect(b.committer.committed(TP)).toBe(5);
    expect(await collect(p.recover())).toEqual([{ key: 'a', snapshot: { state: 1, offset: 4 } }]);
    expect(b.keys.keys(TP)).toEqual(new Set(['a']));
    // Other partitions see nothing.
    expect(await collect(b.forPartition({ topic: 't', partition: 2 }, 'snapshots').recover())).toEqual([]);
  });

  test('does not commit when a conditional write is not applied', async () => {
    const snapshots = new InMemorySnapshotStore<number>({ offsetGated: true });
    snapshots.set(TP, 'a', { state: 9, offset: 10 });
    const committer = new InMemoryOffsetCommitter();
    const p = new StorePartitionPersistence<number, string>({ partition: TP, mode: 'snapshots', snapshots, committer });
    const r = await p.write({
      writes: [
        { key: 'a', snapshot: { state: 1, offset: 4 } },
        { key: 'b', snapshot: { state: 2, offset: 5 } },
      ],
      commitOffset: 6,
    });
    expect(r).toEqual({ statuses: ['not-applied', 'applied'], committed: false });
    expect(committer.committed(TP)).toBeUndefined();
    expect(await snapshots.read(TP, 'a')).toEqual({ state: 9, offset: 10 });
    // Without a key store, recovery walks the snapshot store.
    expect((await collect(p.recover())).map((k) => k.key).sort()).toEqual(['a', 'b']);
  });

  test('a key store that can expire keys pins the keys of applied delete markers (before the commit), and adds the rest', async () => {
    const calls: string[] = [];
    const committer = new InMemoryOffsetCommitter();
    const keys = {
      add: async (_: unknown, ks: readonly string[]) => void calls.push(`add ${ks.join(',')}`),
      pin: async (_: unknown, ks: readonly string[]) => void calls.push(`pin ${ks.join(',')}`),
      remove: async (_: unknown, ks: readonly string[]) => void calls.push(`remove ${ks.join(',')}`),
      list: async function* () {},
    };
    const snapshots = new InMemorySnapshotStore<number>();
    const p = new StorePartitionPersistence<number, string>({
      partition: TP,
      mode: 'snapshots',
      snapshots,
      keys,
      committer: {
        commit: async (tp, offset) => {
          calls.push(`commit ${offset}`);
          await committer.commit(tp, offset);
        },
      },
    });
    await p.write({
      writes: [
        { key: 'new', snapshot: { state: 1, offset: 1 }, addKey: true },
        { key: 'gone', delete: { offset: 2 }, addKey: true },
        { key: 'old', delete: { offset: 3 } },
        { key: 'purged', purge: { offset: 0 } },
      ],
      commitOffset: 1,
    });
    expect(calls).toEqual(['add new', 'pin gone,old', 'remove purged', 'commit 1']);
    // Without pin, a delete marker's new key is added like any other.
    const plain = new InMemoryBackend<number, string>();
    await plain.forPartition(TP, 'snapshots').write({ writes: [{ key: 'gone', delete: { offset: 2 }, addKey: true }] });
    expect(plain.keys.keys(TP)).toEqual(new Set(['gone']));
  });

  test('journal mode appends events, recovers them in order; a delete keeps them (the marker) until the purge removes journal and key together', async () => {
    const b = new InMemoryBackend<number, string>();
    const p = b.forPartition(TP, 'journal');
    await p.write({ writes: [{ key: 'a', events: [event('a', 1, 'x'), event('a', 2, 'y')], addKey: true }] });
    await p.write({ writes: [{ key: 'a', events: [event('a', 3, 'z')] }] });
    expect((await p.read('a'))?.events?.map((e) => e.offset)).toEqual(['1', '2', '3']);
    await p.write({ writes: [{ key: 'a', delete: { offset: 4 }, events: [event('a', 4, 'end')] }], commitOffset: 3 });
    expect((await p.read('a'))?.events?.map((e) => e.offset)).toEqual(['1', '2', '3', '4']);
    expect(b.keys.keys(TP).size).toBe(1);
    await p.write({ writes: [{ key: 'a', purge: { offset: 4 } }], commitOffset: 5 });
    expect(await p.read('a')).toBeUndefined();
    expect(b.keys.keys(TP).size).toBe(0);
    expect(b.committer.committed(TP)).toBe(5);
  });

  test('snapshot mode: a delete leaves a marker that recovery returns; a purge removes it', async () => {
    const b = new InMemoryBackend<number, string>();
    const p = b.forPartition(TP, 'snapshots');
    await p.write({ writes: [{ key: 'a', snapshot: { state: 1, offset: 2 }, addKey: true }] });
    await p.write({ writes: [{ key: 'a', delete: { offset: 7 } }], commitOffset: 3 });
    expect(await p.read('a')).toEqual({ key: 'a', deleted: { offset: 7 } });
    expect(await collect(p.recover())).toEqual([{ key: 'a', deleted: { offset: 7 } }]);
    await p.write({ writes: [{ key: 'a', purge: { offset: 7 } }], commitOffset: 8 });
    expect(await p.read('a')).toBeUndefined();
    expect(await collect(p.recover())).toEqual([]);
  });

  test('a failed separate commit after landed writes is reported, not thrown', async () => {
    const b = new InMemoryBackend<number, string>();
    b.committer.commit = async () => {
      throw new Error('coordinator moved');
    };
    const p = b.forPartition(TP, 'snapshots');
    const r = await p.write({ writes: [{ key: 'a', snapshot: { state: 1, offset: 0 } }], commitOffset: 1 });
    expect(r.statuses).toEqual(['applied']);
    expect(r.committed).toBe(false);
    expect((r.commitError as Error).message).toBe('coordinator moved');
    await expect(p.write({ writes: [], commitOffset: 1 })).rejects.toThrow('coordinator moved');
  });

  test('refuses a mode without the stores it needs', () => {
    const committer = new InMemoryOffsetCommitter();
    expect(() => new StorePartitionPersistence({ partition: TP, mode: 'snapshots', committer })).toThrow(/SnapshotStore/);
    expect(() => new StorePartitionPersistence({ partition: TP, mode: 'journal', committer })).toThrow(/JournalStore/);
  });
});
