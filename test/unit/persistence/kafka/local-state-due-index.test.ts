// The local store's due-time index on a real LMDB store (a temporary directory): kept in the same
// write transaction as the entries — a key's old timers' entries replaced by its new record's, a
// tombstone removing them — so the keys due at a time, out of the partition's memory, are one
// range read; it survives a reopen. And the on-demand cache's lookup, which answers for the changes
// that landed but are not in the store yet.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { KeyTimer } from '../../../../core/persistence-types';
import { LocalPartitionStore, type LocalStateIdentity, type LocalUpdate } from '../../../../persistence/kafka/local-state';
import type { StoredSnapshot } from '../../../../persistence/kafka/recovery';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';
import { StoreSnapshotCache } from '../../../../persistence/kafka/store-snapshot-cache';

const identity: LocalStateIdentity = { flow: 'f', groupId: 'g', snapshotTopic: 'snapshots', partition: 3, transactionalId: 'g-f-snapshot-3' };
const format = snapshotFormat<unknown>();
const none = () => false;
const look = (time: 'processing' | 'event', until: number, limit: number, skip: (key: string) => boolean, after = Number.NEGATIVE_INFINITY) => ({ time, after, until, limit, skip });

function record(offset: number, timers?: KeyTimer[]): StoredSnapshot {
  return { offset: String(offset), bytes: format.encode({ state: { n: offset }, offset, timers }) };
}

let dir: string;
let store: LocalPartitionStore;
let current: Map<string, StoredSnapshot>;
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-due-index-'));
  store = new LocalPartitionStore(dir, identity);
  await store.load();
  current = new Map();
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function write(updates: LocalUpdate[], checkpoint = '1'): Promise<void> {
  const before = new Map(current);
  await store.write(updates, (k) => before.get(k), checkpoint);
  for (const [k, v] of updates) {
    if (v) current.set(k, v);
    else current.delete(k);
  }
}

test('written with the entries: the keys due at a time, earliest first, each once; moved, cancelled and deleted timers leave it', async () => {
  await write([
    ['a', record(1, [{ name: 'x', at: 100, time: 'processing' }, { name: 'y', at: 50, time: 'processing' }])],
    ['b', record(2, [{ name: 'x', at: 70, time: 'processing' }])],
    ['c', record(3, [{ name: 'x', at: 60, time: 'event' }])],
    ['d', record(4)],
  ]);
  expect(store.dueKeys(look('processing', 100, 10, none))).toEqual(['a', 'b']);
  expect(store.dueKeys(look('processing', 69, 10, none))).toEqual(['a']);
  expect(store.dueKeys(look('event', 1_000, 10, none))).toEqual(['c']);
  expect(store.dueKeys(look('processing', 100, 1, none))).toEqual(['a']);
  expect(store.dueKeys(look('processing', 100, 10, (k) => k === 'a'))).toEqual(['b']);
  expect(store.nextDue('processing', 60, none)).toBe(70);
  // Left out (in memory), a key's entry is no hint; past the scan's bound, the time reached is.
  expect(store.nextDue('processing', 0, (k) => k === 'a')).toBe(70);
  expect(store.nextDue('processing', 0, (k) => k === 'a', 0)).toBe(50);
  // Looked at up to 50 before: only what is due after it.
  expect(store.dueKeys(look('processing', 100, 10, none, 50))).toEqual(['b', 'a']);
  expect(store.nextDue('processing', 100, none)).toBe(Number.POSITIVE_INFINITY);

  // a's early timer moved later, b's cancelled, c deleted (a tombstone), d given one.
  await write([
    ['a', record(5, [{ name: 'x', at: 100, time: 'processing' }, { name: 'y', at: 500, time: 'processing' }])],
    ['b', record(6)],
    ['c', undefined],
    ['d', record(7, [{ name: 'x', at: 20, time: 'processing' }])],
  ]);
  expect(store.dueKeys(look('processing', 99, 10, none))).toEqual(['d']);
  expect(store.dueKeys(look('processing', 1_000, 10, none))).toEqual(['d', 'a']);
  expect(store.dueKeys(look('event', 1_000, 10, none))).toEqual([]);

  // Two changes of one key in one write: the last one's timers.
  await write([
    ['d', record(8, [{ name: 'x', at: 30, time: 'processing' }])],
    ['d', record(9, [{ name: 'x', at: 40, time: 'processing' }])],
  ]);
  expect(store.nextDue('processing', 0, none)).toBe(40);

  await store.close();
  store = new LocalPartitionStore(dir, identity);
  expect((await store.load({ readEntries: false })).kind).toBe('loaded');
  expect(store.dueKeys(look('processing', 1_000, 10, none))).toEqual(['d', 'a']);
});

test('the on-demand cache answers for landed changes not in the store yet, and leaves out keys in memory', async () => {
  await write([
    ['a', record(1, [{ name: 'x', at: 100, time: 'processing' }])],
    ['b', record(2, [{ name: 'x', at: 200, time: 'processing' }])],
  ]);
  const cache = new StoreSnapshotCache<unknown>({ format, snapshotTopic: 'snapshots', partition: 3 }, store);
  // Landed in Kafka, the local write still to come: b's timer moved earlier, a deleted, e new.
  cache.apply([
    ['b', record(3, [{ name: 'x', at: 50, time: 'processing' }])],
    ['a', undefined],
    ['e', record(4, [{ name: 'x', at: 150, time: 'processing' }])],
  ]);
  const cached = (until: number, inMemory: (key: string) => boolean) => ({ time: 'processing' as const, after: Number.NEGATIVE_INFINITY, until, limit: 10, inMemory });
  expect(cache.dueKeys(cached(100, none))).toEqual({ keys: ['b'], next: 150 });
  expect(cache.dueKeys(cached(1_000, (k) => k === 'e'))).toEqual({ keys: ['b'], next: Number.POSITIVE_INFINITY });
});
