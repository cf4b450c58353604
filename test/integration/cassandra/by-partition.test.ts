// The opt-in by-partition snapshots layout on the real Cassandra: a Kafka partition's keys
// clustered in buckets. Recovery scans the buckets (no keys table), the fence refuses a real
// second writer's stale generation, deletes and purges leave what the kafka-flow layout leaves,
// corrupt bytes name the key, the schema and the bucket count are checked, and a kafka-flow
// layout table's rows move over with their offsets and generations (safe to re-run).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Client } from 'cassandra-driver';
import { Registry } from 'prom-client';
import { Compressor, withCompression } from '../../../core/codec/compressor';
import { CorruptSnapshotError } from '../../../core/codec/errors';
import { jsonCodec } from '../../../core/codec/json';
import { SnapshotWriteConflictError } from '../../../core/fence-errors';
import { FlowMetrics } from '../../../flow/metrics';
import {
  type CassandraBackend,
  CassandraBucketMismatchError,
  CassandraSchemaError,
  CassandraSnapshotStore,
  keyBucket,
  migrateSnapshotsToByPartition,
  schemaCql,
} from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { SnapshotWrite } from '../../../persistence/snapshot-store';
import { cassandraContactPoints } from '../../support/servers';
import { closeAll, dropKeyspace, keyspaceName, rawClient } from '../../support/servers';
import { expectedTallies, recoverStates, roundRobin, startBackend, step, type Tally, tallyFlow } from './support';

const keyspace = keyspaceName('kft_bypart');
const P = { topic: 'orders', partition: 0 };
type State = { n: number };
const LAYOUT = { layout: 'by-partition', buckets: 16 } as const;

let raw: Client;
const started: CassandraBackend<unknown, unknown>[] = [];
async function backend<S = State, V = unknown>(options: Parameters<typeof startBackend<S, V>>[1] = {}): Promise<CassandraBackend<S, V>> {
  const b = await startBackend<S, V>(keyspace, { ...LAYOUT, ...options });
  started.push(b as CassandraBackend<unknown, unknown>);
  return b;
}

beforeAll(async () => {
  raw = await rawClient();
});

afterAll(async () => {
  await closeAll(...started.map((b) => () => b.close()), () => raw?.shutdown(), () => dropKeyspace(keyspace));
});

const put = (key: string, offset: number, n = offset): SnapshotWrite<State> => ({ kind: 'put', key, snapshot: { state: { n }, offset } });

async function tables(): Promise<string[]> {
  const rs = await raw.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?', [keyspace], { prepare: true });
  return rs.rows.map((r) => String(r.get('table_name'))).sort();
}

async function row(table: string, partition: number, key: string, buckets = 16) {
  const rs = await raw.execute(
    `SELECT offset, generation, value, TTL(offset) AS ttl FROM ${keyspace}.${table} WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = ? AND bucket = ? AND key = ?`,
    [partition, keyBucket(key, buckets), key],
    { prepare: true },
  );
  const r = rs.first();
  return r ? { offset: Number(r.get('offset')), generation: r.get('generation') === null ? null : Number(r.get('generation')), hasValue: r.get('value') !== null, ttl: r.get('ttl') as number | null } : undefined;
}

test('the table is created with its buckets in its comment, and no keys table in snapshots mode', async () => {
  const b = await backend();
  expect(b.keys).toBeUndefined();
  expect(b.snapshots!.layout).toBe('by-partition');
  expect(b.snapshots!.table).toBe(`${keyspace}.snapshots_by_partition`);
  expect(await tables()).toEqual(['snapshots_by_partition']);
  const comment = (await raw.execute('SELECT comment FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?', [keyspace, 'snapshots_by_partition'], { prepare: true })).first();
  expect(comment.get('comment')).toBe('kafka-flow-temporal snapshots by partition; buckets=16');
  // schemaCql shows the same table for autoCreate: false.
  const cql = schemaCql({ keyspace, replication: { class: 'SimpleStrategy', replication_factor: 1 }, tables: b.settings.tables, autoCreate: false, layout: 'by-partition', buckets: 16 }, ['snapshots']);
  expect(cql[1]).toMatch(/PRIMARY KEY\(\(application_id, group_id, topic, partition, bucket\), key\)\n\)\nWITH comment = 'kafka-flow-temporal snapshots by partition; buckets=16'$/);
});

test('recovery scans the buckets: every key of the partition (snapshots and delete markers), no other partition, group or application', async () => {
  const registry = new Registry();
  const b = await backend({ metrics: FlowMetrics.of(registry), flowName: 'bp' });
  const keys = Array.from({ length: 3000 }, (_, i) => `key-${i}`);
  const committer = new InMemoryOffsetCommitter();
  const p0 = await b.forPartition({ ...P, generation: 1, committer });
  await p0.write({ writes: keys.map((key, i) => ({ key, snapshot: { state: { n: i }, offset: i }, addKey: true })), commitOffset: 3000 });
  await p0.write({ writes: keys.filter((_, i) => i % 100 === 0).map((key, i) => ({ key, delete: { offset: 5000 + i } })) });
  // Neighbours that must not be recovered: another partition, group, application.
  const p1 = await b.forPartition({ topic: 'orders', partition: 1, generation: 1, committer });
  await p1.write({ writes: [{ key: 'key-1', snapshot: { state: { n: -1 }, offset: 1 }, addKey: true }] });
  const otherGroup = await backend({ groupId: 'other' });
  await (await otherGroup.forPartition({ ...P, generation: 1, committer })).write({ writes: [{ key: 'stranger', snapshot: { state: { n: 0 }, offset: 0 }, addKey: true }] });
  const otherApp = await backend({ applicationId: 'other' });
  await (await otherApp.forPartition({ ...P, generation: 1, committer })).write({ writes: [{ key: 'stranger2', snapshot: { state: { n: 0 }, offset: 0 }, addKey: true }] });
  expect(committer.committed(P)).toBe(3000);

  // A fresh backend (another process) recovers everything, buckets scanned 2 at a time in pages of 7 rows (paging exercised).
  const fresh = await backend({ metrics: FlowMetrics.of(registry), flowName: 'bp', maxConcurrentReads: 8 });
  const persistence = await fresh.forPartition({ ...P, generation: 2, committer });
  const found = new Map<string, unknown>();
  const shares: number[] = [];
  for await (const k of persistence.recover()) {
    found.set(k.key, k.snapshot ?? k.deleted);
    shares.push(persistence.restoreProgress()?.fraction ?? 0);
  }
  expect(found.size).toBe(3000);
  // The share of the buckets scanned, as the details panel shows it while the recovery runs.
  expect(shares).toEqual([...shares].sort((x, y) => x - y));
  expect(shares[0]).toBeLessThan(1);
  expect(persistence.restoreProgress()).toEqual({ read: 3000, unit: 'keys', fraction: 1 });
  expect(found.get('key-1')).toEqual({ state: { n: 1 }, offset: 1 });
  expect(found.get('key-2999')).toEqual({ state: { n: 2999 }, offset: 2999 });
  expect(found.get('key-0')).toEqual({ offset: 5000 });
  expect(found.get('key-100')).toEqual({ offset: 5001 });
  expect(found.has('stranger')).toBe(false);
  expect(found.has('stranger2')).toBe(false);
  expect(persistence.lastRecovery).toMatchObject({ keysListed: 3000, keysRecovered: 3000, keysMissing: 0, done: true });
  const recovered = (await registry.getSingleMetric('kafka_flow_cassandra_recovered_keys_total')!.get()).values;
  expect(recovered).toEqual([expect.objectContaining({ value: 3000, labels: { flow: 'bp', topic: 'orders', partition: '0' } })]);

  // Paging with a small page size and little parallelism finds the same rows.
  const store = fresh.snapshots!;
  const paged = new Map<string, unknown>();
  const small = new CassandraSnapshotStore<State>({
    session: fresh.session,
    keyspace,
    table: 'snapshots_by_partition',
    applicationId: 'app',
    groupId: 'group',
    codec: withCompression(jsonCodec<State>(), new Compressor()),
    consistency: { read: 'LOCAL_QUORUM', write: 'LOCAL_QUORUM' },
    ttlSeconds: 0,
    fencing: 'lwt',
    fenceRowTtlSeconds: 86_400,
    layout: 'by-partition',
    buckets: 16,
    scanParallelism: 2,
    scanPageSize: 7,
  });
  for await (const [key, s] of small.scan(P)) paged.set(key, s);
  expect(paged.size).toBe(3000);
  // readMany groups keys by bucket.
  const many = await store.readMany(P, ['key-5', 'key-6', 'key-7', 'nope']);
  expect(new Map(many)).toEqual(new Map([['key-5', { state: { n: 5 }, offset: 5 }], ['key-6', { state: { n: 6 }, offset: 6 }], ['key-7', { state: { n: 7 }, offset: 7 }]]));
});

test("fencing 'lwt': a real second writer with a stale generation is refused; the partition stops, recovery loads the owner's state", async () => {
  const T = { topic: 'orders', partition: 7 };
  const oldProcess = await backend();
  const newProcess = await backend();
  const old = oldProcess.snapshots!.withGeneration(1);
  const owner = newProcess.snapshots!.withGeneration(2);
  expect(await old.writeBatch(T, [put('k', 10)])).toEqual(['applied']);
  expect(await owner.writeBatch(T, [put('k', 20)])).toEqual(['applied']); // takes over the older generation's row
  expect(await old.writeBatch(T, [put('k', 15)])).toEqual(['not-applied']);
  expect(await old.writeBatch(T, [put('k', 30)])).toEqual(['not-applied']); // newer offset, older generation
  expect(await old.writeBatch(T, [{ kind: 'delete', key: 'k', offset: 40 }])).toEqual(['not-applied']);
  expect(await owner.writeBatch(T, [put('k', 20)])).toEqual(['applied']); // idempotent retry
  expect(await owner.read(T, 'k')).toEqual({ state: { n: 20 }, offset: 20 });

  // Through the engine: the #732 overlap — the stale owner's flush is refused and recovery loads the committed state.
  const Q = { topic: 'orders', partition: 8 };
  const records = roundRobin(10, 0, 200);
  const group = new InMemoryOffsetCommitter();
  const [staleProcess, ownerProcess] = [await backend<Tally, number>(), await backend<Tally, number>()];
  const stale = tallyFlow(await staleProcess.forPartition({ ...Q, generation: 1, committer: group }), '0', { partition: 8 });
  await stale.flow.recover();
  await step(stale.flow, stale.clock, records.slice(0, 100));
  expect(group.committed(Q)).toBe(100);
  const fresh = tallyFlow(await ownerProcess.forPartition({ ...Q, generation: 2, committer: group }), '100', { partition: 8 });
  expect(await fresh.flow.recover()).toBe(10);
  await step(fresh.flow, fresh.clock, records.slice(100, 200));
  expect(group.committed(Q)).toBe(200);
  // The stale owner folded 50 more records of its own and flushes: refused, nothing committed.
  await expect(step(stale.flow, stale.clock, records.slice(100, 150))).rejects.toBeInstanceOf(SnapshotWriteConflictError);
  expect(group.committed(Q)).toBe(200);
  const states = await recoverStates(await (await backend<Tally, number>()).forPartition({ ...Q, generation: 3, committer: new InMemoryOffsetCommitter() }));
  expect(new Map([...states].map(([k, v]) => [k, v.state]))).toEqual(expectedTallies(records));
});

test("deletes leave a marker and a fence row; a purge with fenceRowTtl 0 removes the row; fencing 'none' writes plainly", async () => {
  const T = { topic: 'orders', partition: 9 };
  const b = await backend();
  const s = b.snapshots!.withGeneration(1);
  expect(await s.writeBatch(T, [put('d', 5), put('e', 5)])).toEqual(['applied', 'applied']);
  expect(await s.writeBatch(T, [{ kind: 'delete', key: 'd', offset: 6 }])).toEqual(['applied']);
  expect(await s.read(T, 'd')).toEqual({ deleted: true, offset: 6 });
  const fence = await row('snapshots_by_partition', 9, 'd');
  expect(fence).toMatchObject({ offset: 6, generation: 1, hasValue: false });
  expect(fence!.ttl).toBeNull(); // a marker stands until the committed offset passes it
  // The fence row refuses an older generation's put; the purge (fenceRowTtl > 0) keeps it for fenceRowTtl.
  expect(await b.snapshots!.withGeneration(0).writeBatch(T, [put('d', 100)])).toEqual(['not-applied']);
  expect(await s.writeBatch(T, [{ kind: 'purge', key: 'd', offset: 6 }])).toEqual(['applied']);
  const purged = await row('snapshots_by_partition', 9, 'd');
  expect(purged).toMatchObject({ offset: 6, hasValue: false });
  expect(purged!.ttl).toBeGreaterThan(86_000);

  const noFenceRows = await backend({ fenceRowTtl: 0 });
  const n = noFenceRows.snapshots!.withGeneration(1);
  expect(await n.writeBatch(T, [{ kind: 'delete', key: 'e', offset: 7 }])).toEqual(['applied']);
  expect(await n.writeBatch(T, [{ kind: 'purge', key: 'e', offset: 7 }])).toEqual(['applied']);
  expect(await row('snapshots_by_partition', 9, 'e')).toBeUndefined();

  const plain = await backend({ fencing: 'none', tables: { snapshots: 'plain_by_partition' } });
  const p = plain.snapshots!.withGeneration(undefined);
  expect(await p.writeBatch(T, [put('f', 9)])).toEqual(['applied']);
  expect(await p.writeBatch(T, [put('f', 3)])).toEqual(['applied']); // last write wins
  expect(await p.read(T, 'f')).toEqual({ state: { n: 3 }, offset: 3 });
  expect(await row('plain_by_partition', 9, 'f')).toMatchObject({ offset: 3, generation: null });
  expect(await p.writeBatch(T, [{ kind: 'purge', key: 'f', offset: 3 }])).toEqual(['applied']);
  expect(await p.read(T, 'f')).toBeUndefined();
});

test("mode 'journal+snapshots': journals and the keys table as before, recovery scans the snapshots' buckets", async () => {
  const T = { topic: 'journaled', partition: 0 };
  const b = await backend({ mode: 'journal+snapshots', tables: { snapshots: 'js_snapshots', keys: 'js_keys', journals: 'js_records' } });
  expect(b.keys).toBeDefined();
  expect(b.journal).toBeDefined();
  const event = (key: string, offset: number) => ({ topic: T.topic, partition: T.partition, key, offset: String(offset), value: offset, timestamp: '0', headers: {} });
  const p = await b.forPartition({ ...T, generation: 1, committer: new InMemoryOffsetCommitter() });
  await p.write({
    writes: [
      { key: 'x', events: [event('x', 1), event('x', 2)], snapshot: { state: { n: 2 }, offset: 2 }, addKey: true },
      { key: 'y', events: [event('y', 3)], snapshot: { state: { n: 3 }, offset: 3 }, addKey: true },
    ],
  });
  const listed: string[] = [];
  for await (const k of b.keys!.list(T)) listed.push(k);
  expect(listed.sort()).toEqual(['x', 'y']);
  const events: unknown[] = [];
  for await (const e of b.journal!.read(T, 'x')) events.push(e.offset);
  expect(events).toEqual(['1', '2']);
  const fresh = await backend({ mode: 'journal+snapshots', tables: { snapshots: 'js_snapshots', keys: 'js_keys', journals: 'js_records' } });
  const recovery = await fresh.forPartition({ ...T, generation: 2, committer: new InMemoryOffsetCommitter() });
  expect(await recoverStates(recovery)).toEqual(
    new Map([
      ['x', { state: { n: 2 }, offset: 2, events: undefined }],
      ['y', { state: { n: 3 }, offset: 3, events: undefined }],
    ]),
  );
  expect(recovery.lastRecovery).toMatchObject({ keysListed: 2, keysRecovered: 2, done: true });
});

test('corrupt bytes fail the recovery with CorruptSnapshotError naming the key', async () => {
  const b = await backend();
  await raw.execute(
    `UPDATE ${keyspace}.snapshots_by_partition SET offset = 42, value = 0x000000ff010203 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'broken' AND partition = 0 AND bucket = ? AND key = 'bad'`,
    [keyBucket('bad', 16)],
    { prepare: true },
  );
  const persistence = await b.forPartition({ topic: 'broken', partition: 0, generation: 1, committer: new InMemoryOffsetCommitter() });
  const recovery = recoverStates(persistence);
  await expect(recovery).rejects.toBeInstanceOf(CorruptSnapshotError);
  await expect(recovery).rejects.toMatchObject({ key: 'bad', offset: '42', topic: 'broken', partition: 0 });
});

test('schema: another layout\'s table, a table without the bucket comment, and another bucket count are refused', async () => {
  // The by-partition layout pointed at a kafka-flow layout table, and the reverse.
  const kafkaFlow = await startBackend<State>(keyspace, { tables: { snapshots: 'kf_snapshots', keys: 'kf_keys' } });
  started.push(kafkaFlow as CassandraBackend<unknown, unknown>);
  await expect(startBackend(keyspace, { ...LAYOUT, tables: { snapshots: 'kf_snapshots' } })).rejects.toThrow(
    /kf_snapshots \(snapshots\) exists but does not match[\s\S]*partition key is \(application_id, group_id, topic, partition, key\), needs \(application_id, group_id, topic, partition, bucket\)[\s\S]*clustering columns is \(\), needs \(key\)/,
  );
  await expect(startBackend(keyspace, { tables: { snapshots: 'snapshots_by_partition', keys: 'kf_keys' } })).rejects.toBeInstanceOf(CassandraSchemaError);

  // A by-partition table made by hand without the comment: the error shows the statement that records it.
  await raw.execute(
    `CREATE TABLE ${keyspace}.handmade (application_id text, group_id text, topic text, partition int, bucket int, key text, offset bigint, created timestamp, metadata text, value blob, generation bigint, PRIMARY KEY((application_id, group_id, topic, partition, bucket), key))`,
  );
  const handmade = startBackend(keyspace, { ...LAYOUT, tables: { snapshots: 'handmade' } });
  await expect(handmade).rejects.toBeInstanceOf(CassandraSchemaError);
  await expect(handmade).rejects.toThrow(`ALTER TABLE ${keyspace}.handmade WITH comment = 'kafka-flow-temporal snapshots by partition; buckets=16'`);

  // Another bucket count on the table made with 16: refused, naming both.
  const mismatch = startBackend(keyspace, { layout: 'by-partition', buckets: 32 });
  await expect(mismatch).rejects.toBeInstanceOf(CassandraBucketMismatchError);
  await expect(mismatch).rejects.toMatchObject({ code: 'CASSANDRA_BUCKETS', tableBuckets: 16, configuredBuckets: 32 });
  await expect(mismatch).rejects.toThrow(/lays out snapshots in 16 buckets[\s\S]*configured with buckets: 32/);
  // The default (256) is another count too.
  await expect(startBackend(keyspace, { layout: 'by-partition' })).rejects.toBeInstanceOf(CassandraBucketMismatchError);
});

test('migration: a kafka-flow layout table\'s rows move with their offsets and generations; re-running is safe and keeps newer rows', async () => {
  const src = await startBackend<State>(keyspace, { tables: { snapshots: 'old_snapshots', keys: 'old_keys' } });
  started.push(src as CassandraBackend<unknown, unknown>);
  const A = { topic: 'orders', partition: 0 };
  const B = { topic: 'payments', partition: 3 };
  const keys = Array.from({ length: 1200 }, (_, i) => `m-${i}`);
  const committer = new InMemoryOffsetCommitter();
  await (await src.forPartition({ ...A, generation: 4, committer })).write({
    writes: keys.map((key, i) => ({ key, snapshot: { state: { n: i }, offset: 100 + i }, addKey: true })),
  });
  await (await src.forPartition({ ...A, generation: 5, committer })).write({ writes: [{ key: 'm-1', delete: { offset: 9000 } }] });
  await (await src.forPartition({ ...B, generation: 2, committer })).write({ writes: [{ key: 'pay', snapshot: { state: { n: 7 }, offset: 70 }, addKey: true }] });
  // A row written without a generation (kafka-flow itself), and another group's row (not moved).
  await raw.execute(
    `UPDATE ${keyspace}.old_snapshots SET offset = 3, value = ? WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'kf'`,
    [Buffer.from('{"n":3}')],
    { prepare: true },
  );
  await raw.execute(
    `UPDATE ${keyspace}.old_snapshots SET offset = 3, value = ? WHERE application_id = 'app' AND group_id = 'other' AND topic = 'orders' AND partition = 0 AND key = 'foreign'`,
    [Buffer.from('{"n":3}')],
    { prepare: true },
  );

  const target = await backend({ tables: { snapshots: 'migrated' } });
  const progress: number[] = [];
  const report = await migrateSnapshotsToByPartition(target as CassandraBackend<unknown, unknown>, { fromTable: 'old_snapshots', pageSize: 500, onProgress: (r) => progress.push(r.rowsRead) });
  expect(report).toMatchObject({ rowsRead: 1202, written: 1202, keptNewer: 0, deleteMarkers: 1, partitions: 2 });
  expect(progress.length).toBeGreaterThanOrEqual(3);
  expect(await row('migrated', 0, 'm-5')).toMatchObject({ offset: 105, generation: 4, hasValue: true });
  expect(await row('migrated', 0, 'm-1')).toMatchObject({ offset: 9000, generation: 5, hasValue: false });
  expect(await row('migrated', 0, 'kf')).toMatchObject({ offset: 3, generation: null, hasValue: true });

  const recovered = async (tp: { topic: string; partition: number }) => {
    const fresh = await backend({ tables: { snapshots: 'migrated' } });
    return recoverStates(await fresh.forPartition({ ...tp, generation: 6, committer: new InMemoryOffsetCommitter() }));
  };
  const a = await recovered(A);
  expect(a.size).toBe(1201);
  expect(a.get('m-0')).toEqual({ state: { n: 0 }, offset: 100, events: undefined });
  expect(a.get('m-1')).toEqual({ state: undefined, offset: undefined, events: undefined }); // the delete marker
  expect(a.get('kf')).toMatchObject({ state: { n: 3 }, offset: 3 });
  expect(a.has('foreign')).toBe(false);
  expect((await recovered(B)).get('pay')).toMatchObject({ state: { n: 7 }, offset: 70 });

  // The flow moves on under the new layout (generation 6), then the migration runs again: every
  // row is there as it was, and the newer row is kept.
  expect(await target.snapshots!.withGeneration(6).writeBatch(A, [put('m-2', 5000)])).toEqual(['applied']);
  const again = await migrateSnapshotsToByPartition(target as CassandraBackend<unknown, unknown>, { fromTable: 'old_snapshots' });
  expect(again).toMatchObject({ rowsRead: 1202, written: 1201, keptNewer: 1 });
  expect(await row('migrated', 0, 'm-2')).toMatchObject({ offset: 5000, generation: 6 });
  expect(await row('migrated', 0, 'm-5')).toMatchObject({ offset: 105, generation: 4 });

  // Into a kafka-flow layout backend, or from a table that is not kafka-flow's: refused.
  await expect(migrateSnapshotsToByPartition(src as CassandraBackend<unknown, unknown>)).rejects.toBeInstanceOf(CassandraSchemaError);
  await expect(migrateSnapshotsToByPartition(target as CassandraBackend<unknown, unknown>, { fromTable: 'snapshots_by_partition' })).rejects.toThrow(/not a kafka-flow layout snapshots table/);
  await expect(migrateSnapshotsToByPartition(target as CassandraBackend<unknown, unknown>, { fromTable: 'absent' })).rejects.toThrow(/does not exist/);
});

test('the migration command: scripts/cassandra-migrate-layout.ts <flow-module> moves the rows and prints its report', async () => {
  const src = await startBackend<State>(keyspace, { tables: { snapshots: 'cmd_old', keys: 'cmd_old_keys' } });
  started.push(src as CassandraBackend<unknown, unknown>);
  const T = { topic: 'orders', partition: 2 };
  await (await src.forPartition({ ...T, generation: 3, committer: new InMemoryOffsetCommitter() })).write({
    writes: Array.from({ length: 50 }, (_, i) => ({ key: `c${i}`, snapshot: { state: { n: i }, offset: i }, addKey: true })),
  });
  const root = path.resolve(__dirname, '../../..');
  const run = () =>
    promisify(execFile)(process.execPath, ['bin/run-ts.js', 'scripts/cassandra-migrate-layout.ts', 'test/fixtures/cassandra-layout-flow.ts', '--from-table', 'cmd_old'], {
      cwd: root,
      env: { ...process.env, CASSANDRA_CONTACT_POINTS: cassandraContactPoints.join(','), TEST_CASSANDRA_KEYSPACE: keyspace, TEST_CASSANDRA_TABLE: 'cmd_new' },
    });
  const { stdout } = await run();
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as { done?: object });
  expect(lines.at(-1)!.done).toMatchObject({ rowsRead: 50, written: 50, keptNewer: 0, partitions: 1 });
  expect(await row('cmd_new', 2, 'c7')).toMatchObject({ offset: 7, generation: 3, hasValue: true });
  // Again: the same rows, nothing changed.
  expect(JSON.parse((await run()).stdout.trim().split('\n').at(-1)!).done).toMatchObject({ rowsRead: 50, written: 50, keptNewer: 0 });
  // A wrong bucket count for the new table: the command fails with the typed error's one line, exit 1.
  const wrong = promisify(execFile)(process.execPath, ['bin/run-ts.js', 'scripts/cassandra-migrate-layout.ts', 'test/fixtures/cassandra-layout-flow.ts', '--from-table', 'cmd_old'], {
    cwd: root,
    env: { ...process.env, CASSANDRA_CONTACT_POINTS: cassandraContactPoints.join(','), TEST_CASSANDRA_KEYSPACE: keyspace, TEST_CASSANDRA_TABLE: 'cmd_new', TEST_CASSANDRA_BUCKETS: '32' },
  });
  await expect(wrong).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('CassandraBucketMismatchError: table') });
});
