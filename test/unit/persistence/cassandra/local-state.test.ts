// Cassandra's local state (persistence/cassandra/local-state.ts) on a real LMDB store in a temp
// directory: when a restore may trust the store (the group's last commit carries its lineage and
// is not past what it covers), the write-ahead of each batch, and what a failed local write does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../../../core/logger';
import type { KeyTimer } from '../../../../core/persistence-types';
import type { KeyWrite, WriteBatch } from '../../../../flow/ports';
import { CassandraLocalState, LINEAGE_METADATA_PREFIX, LocalStateWriteError, readStoredCoverage } from '../../../../persistence/cassandra/local-state';
import { LocalPartitionStore } from '../../../../persistence/kafka/local-state';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';
import type { CommittedPosition } from '../../../../persistence/offset-committer';
import { InMemoryOffsetCommitter, InMemorySnapshotStore } from '../../../../persistence/memory';
import { StorePartitionPersistence } from '../../../../persistence/store-partition-persistence';

type S = { n: number };
let dir: string;
const opened: CassandraLocalState<S, unknown>[] = [];

function local(onDemand = false): CassandraLocalState<S, unknown> {
  const l = new CassandraLocalState<S, unknown>({
    dir,
    flow: 'f',
    groupId: 'g',
    topic: 'orders',
    partition: 3,
    table: 'kafka_flow.snapshots_v2',
    format: snapshotFormat<S>(),
    onDemand,
    log: silentLogger,
  });
  opened.push(l);
  return l;
}

const put = (key: string, n: number, offset: number, timers?: readonly KeyTimer[]): KeyWrite<S, unknown> => ({
  key,
  snapshot: { state: { n }, offset, ...(timers ? { timers } : {}) },
});
const batch = (writes: KeyWrite<S, unknown>[], commitOffset?: number): WriteBatch<S, unknown> => ({ writes, ...(commitOffset !== undefined ? { commitOffset } : {}) });
const position = (offset: number, metadata: string | undefined): CommittedPosition => ({ offset: String(offset), metadata: metadata ?? null });

/** A store written by one owner: keys a, b (b deleted), c purged; committed at 12 with its lineage. */
async function writtenStore(): Promise<{ metadata: string }> {
  const first = local();
  expect(await first.load(undefined)).toEqual({ kind: 'full', reason: 'no checkpoint' });
  await first.restored([{ key: 'c', snapshot: { state: { n: 0 }, offset: 1 } }]);
  await first.writeAhead(batch([put('a', 1, 5), put('b', 2, 7)], 8));
  await first.writeAhead(batch([{ key: 'b', delete: { offset: 9 } }, put('a', 3, 11), { key: 'c', purge: { offset: 1 } }], 12));
  const metadata = first.commitMetadata()!;
  expect(metadata).toBe(LINEAGE_METADATA_PREFIX + first.lineageId);
  await first.close();
  return { metadata };
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cassandra-local-'));
});
afterEach(async () => {
  for (const l of opened.splice(0)) await l.close().catch(() => undefined);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a restart after its own last commit loads the store: every key as written, delete markers kept, purged keys gone', async () => {
  const { metadata } = await writtenStore();
  const again = local();
  const loaded = await again.load(position(12, metadata));
  expect(loaded.kind).toBe('loaded');
  if (loaded.kind !== 'loaded') return;
  expect(loaded.keys).toBe(2);
  const keys = [...loaded.entries!].map(([k, s]) => again.recovered(k, s));
  expect(keys.map((k) => ({ key: k.key, state: k.snapshot?.state, offset: k.snapshot?.offset, deleted: k.deleted }))).toEqual([
    { key: 'a', state: { n: 3 }, offset: 11, deleted: undefined },
    { key: 'b', state: undefined, offset: undefined, deleted: { offset: 9 } },
  ]);
  // A new lineage from this restore on, based on the commit it found.
  expect(again.commitMetadata()).not.toBe(metadata);
  await again.writeAhead(batch([put('a', 4, 13)], 14));
  const next = again.commitMetadata()!;
  await again.close();
  expect((await local().load(position(14, next))).kind).toBe('loaded');
});

test('the owner coming back to its store and committing (even at the same offset) makes another store read from the same commit untrusted', async () => {
  // Store Y committed at 12; store X (another directory) read the partition from Cassandra then.
  const { metadata: y } = await writtenStore();
  const yDir = dir;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cassandra-local-x-'));
  const xDir = dir;
  const x = local();
  expect((await x.load(position(12, y))).kind).toBe('full');
  await x.restored([{ key: 'a', snapshot: { state: { n: 3 }, offset: 11 } }]);
  await x.close();
  // X never committed: the group's commit is still the one X read from — X's store is good.
  expect((await local().load(position(12, y))).kind).toBe('loaded');
  // Y takes the partition back (trusted: its own lineage) and commits timer fires at the same offset.
  dir = yDir;
  const yBack = local();
  expect((await yBack.load(position(12, y))).kind).toBe('loaded');
  await yBack.writeAhead(batch([put('a', 5, 11)], 12));
  const yNew = yBack.commitMetadata()!;
  await yBack.close();
  dir = xDir;
  const xAgain = local();
  const outcome = await xAgain.load(position(12, yNew));
  expect(outcome.kind).toBe('full');
  await xAgain.close();
  fs.rmSync(xDir, { recursive: true, force: true });
  dir = yDir;
});

test('a store ahead of the commit (a crash between the local write and the commit) is trusted: its keys carry their offsets', async () => {
  const { metadata } = await writtenStore();
  const loaded = await local().load(position(8, metadata));
  expect(loaded.kind).toBe('loaded');
});

test.each([
  ['another owner committed since (other metadata)', position(12, `${LINEAGE_METADATA_PREFIX}someone-else`), /another owner committed since/],
  ['an owner without local state committed since (no metadata)', position(12, undefined), /another owner committed since, without local state/],
  ['the group has no committed offset', undefined, /no committed offset/],
])('not trusted when %s: discarded, a fresh lineage, and the next load finds nothing', async (_what, committed, reason) => {
  await writtenStore();
  const again = local();
  const before = again.lineageId;
  const outcome = await again.load(committed);
  expect(outcome.kind).toBe('full');
  if (outcome.kind === 'full') expect(outcome.reason).toMatch(reason);
  expect(again.lineageId).not.toBe(before);
  expect(again.has('a')).toBe(false);
  await again.close();
  expect(await local().load(committed)).toEqual({ kind: 'full', reason: 'no checkpoint' });
});

test('not trusted when the group committed past what the store covers (commits went on without it)', async () => {
  const { metadata } = await writtenStore();
  const outcome = await local().load(position(13, metadata));
  expect(outcome).toEqual({ kind: 'full', reason: 'the group committed offset 13, past the store\'s 12' });
});

test('a full read written to a fresh store: trusted while the group\'s commit is still the one it read from (a lineage), or once one of its own follows', async () => {
  const { metadata: old } = await writtenStore();
  const second = local();
  const other = `${LINEAGE_METADATA_PREFIX}other`;
  expect((await second.load(position(12, other))).kind).toBe('full');
  await second.restored([{ key: 'a', snapshot: { state: { n: 9 }, offset: 20 } }]);
  expect(second.commitMetadata()).not.toBe(old);
  await second.close();
  // Crashed before any commit of its own: nothing committed since its read.
  expect((await local().load(position(12, other))).kind).toBe('loaded');
  // Something committed since (another offset), or the read started from a commit without a lineage: read again.
  const third = local();
  expect((await third.load(position(12, undefined))).kind).toBe('full');
  await third.restored([]);
  await third.close();
  expect((await local().load(position(12, undefined))).kind).toBe('full');
});

test('keys read on demand: has, readNow and the due-time index, with nothing loaded', async () => {
  const first = local(true);
  await first.load(undefined);
  await first.writeAhead(
    batch([put('a', 1, 5), put('t', 2, 6, [{ name: 'wake', at: 1_000, time: 'processing' }]), put('u', 3, 7, [{ name: 'later', at: 9_000, time: 'processing' }])], 8),
  );
  const metadata = first.commitMetadata();
  await first.close();
  const again = local(true);
  const loaded = await again.load(position(8, metadata));
  expect(loaded).toEqual({ kind: 'loaded', keys: 3, entries: undefined, unlanded: ['a', 't', 'u'] }); // written ahead only
  expect(again.has('a')).toBe(true);
  expect(again.has('zzz')).toBe(false);
  expect(again.readNow('a')?.snapshot?.state).toEqual({ n: 1 });
  const due = again.readDue({ time: 'processing', after: Number.NEGATIVE_INFINITY, until: 5_000, limit: 10, inMemory: () => false });
  expect(due.keys.map((k) => k.key)).toEqual(['t']);
  expect(due.next).toBe(9_000);
});

test('the write-ahead reports each write\'s stored size (a purge 0)', async () => {
  const l = local();
  await l.load(undefined);
  const sizes = await l.writeAhead(batch([put('a', 1, 5), { key: 'b', delete: { offset: 6 } }, { key: 'c', purge: { offset: 2 } }], 7));
  expect(sizes).toHaveLength(3);
  expect(sizes![0]).toBeGreaterThan(10);
  expect(sizes![1]).toBeGreaterThan(10);
  expect(sizes![2]).toBe(0);
});

test('a failed local write with every key in memory: the store stops following and commits stop carrying its lineage', async () => {
  const l = local();
  await l.load(undefined);
  await l.writeAhead(batch([put('a', 1, 5)], 6));
  expect(l.commitMetadata()).toBeDefined();
  // A newer store of the same path in this process takes it over: the older one's writes are refused.
  const newer = new LocalPartitionStore(dir, l.store.identity);
  await newer.load();
  await expect(l.writeAhead(batch([put('a', 2, 7)], 8))).resolves.toHaveLength(1);
  expect(l.commitMetadata()).toBeUndefined();
  await newer.close();
});

test('a failed local write with keys read on demand fails the batch (LocalStateWriteError) and the lineage stays', async () => {
  const l = local(true);
  await l.load(undefined);
  await l.writeAhead(batch([put('a', 1, 5)], 6));
  const newer = new LocalPartitionStore(dir, l.store.identity);
  await newer.load();
  await expect(l.writeAhead(batch([put('a', 2, 7)], 8))).rejects.toBeInstanceOf(LocalStateWriteError);
  expect(l.commitMetadata()).toBeDefined();
  await newer.close();
});

test('the stores left in a state directory tell the assignor how far each partition\'s commits go (read in a child process)', async () => {
  await writtenStore(); // partition 3, covered 12
  const other = new CassandraLocalState<S, unknown>({ dir, flow: 'f', groupId: 'g', topic: 'orders', partition: 10, table: 'kafka_flow.snapshots_v2', format: snapshotFormat<S>(), onDemand: false, log: silentLogger });
  opened.push(other);
  await other.load(undefined);
  await other.writeAhead(batch([put('z', 1, 40)], 41));
  expect(other.coverage).toBe('41');
  await other.close();
  expect(await readStoredCoverage(dir, { flow: 'f', groupId: 'g' }, ['orders', 'payments'])).toEqual({ orders: { '3': '12', '10': '41' } });
  expect(await readStoredCoverage(dir, { flow: 'other', groupId: 'g' }, ['orders'])).toEqual({});
});

test('a batch whose outputs were not produced never reaches the store: a restore from it folds those records again and emits them (found by the chaos suite: 171 outputs lost)', async () => {
  const { metadata } = await writtenStore(); // a at 11 (n 3), committed 12
  const again = local();
  expect((await again.load(position(12, metadata))).kind).toBe('loaded');
  const snapshots = new InMemorySnapshotStore<S>();
  const failing = { send: async () => Promise.reject(new Error('the brokers are gone')) };
  const persistence = new StorePartitionPersistence<S, unknown>({
    partition: { topic: 'orders', partition: 3 },
    mode: 'snapshots',
    snapshots,
    committer: new InMemoryOffsetCommitter(),
    outputs: failing,
    local: again,
  });
  // The record at 12 changed `a` and emitted an output; producing it fails (then the worker dies).
  const output = { kind: 'emitted' as const, topic: 'out', key: 'a', value: 'n=4' };
  await expect(persistence.write({ writes: [{ key: 'a', snapshot: { state: { n: 4 }, offset: 12 }, outputs: [output] }], commitOffset: 13 })).rejects.toThrow('the brokers are gone');
  await again.close();
  // The next restore (the group's commit unchanged) must have `a` before the record at 12, so the replay emits again.
  const next = local();
  const loaded = await next.load(position(12, metadata));
  expect(loaded.kind).toBe('loaded');
  if (loaded.kind !== 'loaded') return;
  const a = next.recovered('a', loaded.entries!.get('a')!);
  expect({ state: a.snapshot?.state, offset: a.snapshot?.offset }).toEqual({ state: { n: 3 }, offset: 11 });
});

test('the keys written ahead whose Cassandra writes did not land are listed for the next trusted restore; landed ones are not', async () => {
  const { metadata } = await writtenStore(); // a at 11, b deleted at 9; committed at 12
  const again = local();
  const first = await again.load(position(12, metadata));
  // writtenStore wrote ahead only (nothing reached Cassandra): its keys are listed, the purged c is not.
  expect(first).toMatchObject({ kind: 'loaded', unlanded: ['a', 'b'] });
  const snapshots = new InMemorySnapshotStore<S>();
  const committer = new InMemoryOffsetCommitter();
  const persistence = new StorePartitionPersistence<S, unknown>({ partition: { topic: 'orders', partition: 3 }, mode: 'snapshots', snapshots, committer, local: again });
  await persistence.write(batch([put('a', 4, 13), { key: 'b', delete: { offset: 9 } }], 14));
  expect(committer.position({ topic: 'orders', partition: 3 })).toEqual({ offset: '14', metadata: again.commitMetadata() });
  // The next batch reaches the store, not the stores behind it (the process dies there).
  snapshots.writeBatch = () => Promise.reject(new Error('killed before Cassandra got it'));
  await expect(persistence.write(batch([put('d', 1, 14), { key: 'b', delete: { offset: 15 } }], 16))).rejects.toThrow('killed before Cassandra got it');
  await again.close();
  const next = local();
  const loaded = await next.load(committer.position({ topic: 'orders', partition: 3 }));
  expect(loaded).toMatchObject({ kind: 'loaded', unlanded: ['d', 'b'] });
  // Landed on the next owner's write: listed no more once the store is closed.
  const landing = new StorePartitionPersistence<S, unknown>({ partition: { topic: 'orders', partition: 3 }, mode: 'snapshots', snapshots: new InMemorySnapshotStore<S>(), committer, local: next });
  await landing.write(batch([put('d', 1, 14), { key: 'b', delete: { offset: 15 } }]));
  await next.close();
  expect(await local().load(committer.position({ topic: 'orders', partition: 3 }))).toMatchObject({ kind: 'loaded', unlanded: [] });
});
