
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import type { JournalEvent } from '../../../core/persistence-types';
import type { CassandraBackend, CassandraPartitionPersistence } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { cassandraScope, } from '../../support/servers';
import { startBackend } from './support';

const cassandra = cassandraScope('kft_journal_purge');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };
const tables = { journals: 'jp_records', keys: 'jp_keys', snapshots: 'jp_snapshots' };
async function process(options: Parameters<typeof startBackend<number, number>>[1] = {}) {
  const backend = await startBackend<number, number>(keyspace, { mode: 'journal', tables, ...options });
  cassandra.defer(() => backend.close());
  return backend;
}

const ev = (key: string, offset: number, value: number): JournalEvent<number> => ({
  topic: P.topic,
  partition: P.partition,
  offset: String(offset),
  key,
  value,
  timestamp: '0',
  headers: {},
});

async function journal(persistence: CassandraPartitionPersistence<number, number>, key: string): Promise<string[] | undefined> {
  const found = await persistence.read(key);
  return found?.events?.map((e) => e.offset);
}

async function listed(backend: CassandraBackend<number, number>): Promise<string[]> {
  const keys: string[] = [];
  for await (const k of backend.keys!.list(P)) keys.push(k);
  return keys.sort();
}

test("a stale owner's purge of a key the new owner has appended to since is fenced; the owner's own purge lands", async () => {
  const [staleProcess, ownerProcess] = [await process(), await process()];
  const committer = new InMemoryOffsetCommitter();
  const stale = await staleProcess.forPartition({ ...P, generation: 1, committer });
  const owner = await ownerProcess.forPartition({ ...P, generation: 2, committer });

  // Generation 1: j folded to 3, then deleted at offset 1 (journal mode's marker: the journal
  // itself, ending in the deleting record), and its commit passed the marker before the rebalance.
  expect((await stale.write({ writes: [{ key: 'j', events: [ev('j', 0, 3), ev('j', 1, 0)], addKey: true }] })).statuses).toEqual(['applied']);
  // Generation 2 recovered j as deleted, and a new record revived it.
  expect((await owner.write({ writes: [{ key: 'j', events: [ev('j', 5, 2)] }] })).statuses).toEqual(['applied']);

  // The stale owner, not yet aware of the rebalance, purges the marker its commit has passed.
  const purge = stale.write({ writes: [{ key: 'j', purge: { offset: 1 } }], commitOffset: 2 });
  await expect(purge).rejects.toBeInstanceOf(SnapshotWriteFencedError);
  await expect(purge).rejects.toMatchObject({ reason: 'store' });
  expect(await journal(owner, 'j')).toEqual(['0', '1', '5']); // the owner's event survived
  expect(await listed(ownerProcess)).toEqual(['j']);

  // The owner's own purge (once its commit passes j's next delete) removes the journal and the key.
  expect((await owner.write({ writes: [{ key: 'j', events: [ev('j', 6, 0)] }] })).statuses).toEqual(['applied']);
  expect((await owner.write({ writes: [{ key: 'j', purge: { offset: 6 } }] })).statuses).toEqual(['applied']);
  expect(await journal(owner, 'j')).toBeUndefined();
  expect(await journal(stale, 'j')).toBeUndefined();
  expect(await listed(ownerProcess)).toEqual([]);
  // And a recovery finds nothing of it (the fence left behind is no event).
  const fresh = await (await process()).forPartition({ ...P, generation: 3, committer });
  const found: string[] = [];
  for await (const k of fresh.recover()) found.push(k.key);
  expect(found).toEqual([]);
});

test("journals written without a generation (kafka-flow, fencing 'none') are purged by a fenced writer; a purge of nothing is done", async () => {
  const [plainProcess, fencedProcess] = [await process({ fencing: 'none' }), await process()];
  const committer = new InMemoryOffsetCommitter();
  const plain = await plainProcess.forPartition({ ...P, generation: 1, committer });
  const fenced = await fencedProcess.forPartition({ ...P, generation: 4, committer });
  expect((await plain.write({ writes: [{ key: 'legacy', events: [ev('legacy', 10, 1), ev('legacy', 11, 0)], addKey: true }] })).statuses).toEqual(['applied']);
  expect(await journal(fenced, 'legacy')).toEqual(['10', '11']);
  expect((await fenced.write({ writes: [{ key: 'legacy', purge: { offset: 11 } }] })).statuses).toEqual(['applied']);
  expect(await journal(fenced, 'legacy')).toBeUndefined();
  expect((await fenced.write({ writes: [{ key: 'never', purge: { offset: 3 } }] })).statuses).toEqual(['applied']);

  // fenceRowTtl 0: a purge leaves nothing of the journal, not even its generation.
  const bare = await (await process({ fenceRowTtl: 0 })).forPartition({ ...P, generation: 4, committer });
  expect((await bare.write({ writes: [{ key: 'gone', events: [ev('gone', 20, 0)], addKey: true }] })).statuses).toEqual(['applied']);
  expect((await bare.write({ writes: [{ key: 'gone', purge: { offset: 20 } }] })).statuses).toEqual(['applied']);
  const rs = await cassandra.raw.execute(`SELECT * FROM ${keyspace}.jp_records WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'gone'`);
  expect(rs.rows).toHaveLength(0);
});

test("journal+snapshots: the stale owner's purge is fenced before it touches the journal or the snapshot", async () => {
  const options = { mode: 'journal+snapshots' as const, tables: { journals: 'js_records', keys: 'js_keys', snapshots: 'js_snapshots' } };
  const [staleProcess, ownerProcess] = [await process(options), await process(options)];
  const committer = new InMemoryOffsetCommitter();
  const stale = await staleProcess.forPartition({ ...P, generation: 1, committer });
  const owner = await ownerProcess.forPartition({ ...P, generation: 2, committer });
  expect((await stale.write({ writes: [{ key: 'k', events: [ev('k', 0, 3), ev('k', 1, 0)], delete: { offset: 1 }, addKey: true }] })).statuses).toEqual(['applied']);
  expect((await owner.write({ writes: [{ key: 'k', events: [ev('k', 5, 2)], snapshot: { state: 2, offset: 5 } }] })).statuses).toEqual(['applied']);
  await expect(stale.write({ writes: [{ key: 'k', purge: { offset: 1 } }] })).rejects.toBeInstanceOf(SnapshotWriteFencedError);
  expect(await owner.read('k')).toEqual({ key: 'k', snapshot: { state: 2, offset: 5 } });
  const rs = await cassandra.raw.execute(`SELECT offset FROM ${keyspace}.js_records WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'k'`);
  expect(rs.rows.map((r) => String(r.get('offset')))).toEqual(['0', '1', '5']);
});
