// The Cassandra stores on the real server: snapshots, keys and journals round trip (deletes
// included), TTLs expire rows, large states are stored LZ4-compressed, corrupt bytes fail with a
// typed error naming the key, and recovery lists exactly one partition's keys across segments.
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { FlowMetrics } from '../../../flow/metrics';
import { CorruptSnapshotError } from '../../../core/codec/errors';
import { keyHash } from '../../../core/redact';
import { type CassandraBackend, CassandraPersistenceError, keySegment } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { JournalEvent } from '../../../core/persistence-types';
import { cassandraScope, closeAll, dropKeyspace, keyspaceName } from '../../support/servers';
import { recoverStates, startBackend } from './support';

const cassandra = cassandraScope('kft_stores');
const { keyspace } = cassandra;
const P0 = { topic: 'orders', partition: 0 };
const P1 = { topic: 'orders', partition: 1 };
const OTHER = { topic: 'payments', partition: 0 };
const R0 = { topic: 'recovery', partition: 0 };
const R1 = { topic: 'recovery', partition: 1 };

type State = { n: number; text?: string };

let backend: CassandraBackend<State, unknown>;
beforeAll(async () => {
  backend = await startBackend<State>(keyspace, { mode: 'journal+snapshots' });
  cassandra.defer(() => backend.close());
});

function event(key: string, offset: number, value: unknown, headers: Record<string, unknown> = {}): JournalEvent<unknown> {
  return { topic: P0.topic, partition: P0.partition, key, offset: String(offset), value, timestamp: String(1_600_000_000_000 + offset), headers };
}

describe('CassandraSnapshotStore', () => {
  test('put, overwrite with a newer offset, read, delete', async () => {
    const store = backend.snapshots!.withGeneration(1);
    expect(await store.read(P0, 'a')).toBeUndefined();
    expect(await store.writeBatch(P0, [{ kind: 'put', key: 'a', snapshot: { state: { n: 1 }, offset: 10 } }])).toEqual(['applied']);
    expect(await store.read(P0, 'a')).toEqual({ state: { n: 1 }, offset: 10 });
    expect(await store.writeBatch(P0, [{ kind: 'put', key: 'a', snapshot: { state: { n: 2 }, offset: 11 } }])).toEqual(['applied']);
    expect(await store.read(P0, 'a')).toEqual({ state: { n: 2 }, offset: 11 });
    // The same key in another partition is another row.
    expect(await store.read(P1, 'a')).toBeUndefined();

    // kafka-flow's columns are filled in: created, metadata, value; plus the owner generation.
    const row = (
      await cassandra.raw.execute(
        `SELECT offset, created, metadata, value, generation FROM ${keyspace}.snapshots_v2 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'a'`,
      )
    ).first();
    expect(row.get('offset').toString()).toBe('11');
    expect(row.get('generation').toString()).toBe('1');
    expect(row.get('metadata')).toBe('');
    expect(Date.now() - (row.get('created') as Date).getTime()).toBeLessThan(60_000);

    // A delete leaves its marker (the deleting offset, no value) so a replay below it is skipped.
    expect(await store.writeBatch(P0, [{ kind: 'delete', key: 'a', offset: 12 }])).toEqual(['applied']);
    expect(await store.read(P0, 'a')).toEqual({ deleted: true, offset: 12 });
  });

  test('a large state is stored LZ4-compressed in kafka-flow\'s format and reads back', async () => {
    const store = backend.snapshots!.withGeneration(1);
    const text = 'the quick brown fox jumps over the lazy dog; '.repeat(25_000); // ≈ 1.1 MB
    await store.writeBatch(P0, [{ kind: 'put', key: 'big', snapshot: { state: { n: 7, text }, offset: 5 } }]);
    const stored = (
      await cassandra.raw.execute(
        `SELECT value FROM ${keyspace}.snapshots_v2 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'big'`,
      )
    ).first().get('value') as Buffer;
    const headerLength = stored.readInt32BE(0);
    expect(stored.subarray(4, 4 + headerLength).toString()).toBe('{"compressed":true}');
    expect(stored.length).toBeLessThan(text.length / 20);
    expect(await store.read(P0, 'big')).toEqual({ state: { n: 7, text }, offset: 5 });
  });

  test('corrupt bytes fail with CorruptSnapshotError naming the key, in reads and in recovery', async () => {
    const store = backend.snapshots!.withGeneration(1);
    const where = `application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 3 AND key = 'broken'`;
    await cassandra.raw.execute(`UPDATE ${keyspace}.snapshots_v2 SET offset = 42, value = 0x000000ff010203 WHERE ${where}`);
    await backend.keys!.add({ topic: 'orders', partition: 3 }, ['broken']);

    const read = store.read({ topic: 'orders', partition: 3 }, 'broken');
    await expect(read).rejects.toBeInstanceOf(CorruptSnapshotError);
    await expect(read).rejects.toMatchObject({ key: 'broken', offset: '42', topic: 'orders', partition: 3 });
    // Named by its hash (flows log keys only with logKeys: true).
    await expect(read).rejects.toThrow(`key #${keyHash('broken')}`);

    const persistence = await backend.forPartition({ topic: 'orders', partition: 3, generation: 1, committer: new InMemoryOffsetCommitter() });
    await expect(recoverStates(persistence)).rejects.toMatchObject({ name: 'CorruptSnapshotError', key: 'broken' });
  });

  test('TTL: snapshots, keys and journal rows written with a TTL expire', async () => {
    const ttlKeyspace = keyspaceName('kft_ttl');
    const short = await startBackend<State>(ttlKeyspace, {
      mode: 'journal+snapshots',
      ttl: { snapshots: '4s', keys: '4s', journals: '4s' }, // long enough to read back on a loaded machine
    });
    try {
      const p = await short.forPartition({ ...P0, generation: 1, committer: new InMemoryOffsetCommitter() });
      await p.write({
        writes: [{ key: 't', snapshot: { state: { n: 1 }, offset: 1 }, events: [event('t', 1, { v: 1 })], addKey: true }],
      });
      const ttl = (
        await cassandra.raw.execute(
          `SELECT TTL(value) AS ttl FROM ${ttlKeyspace}.snapshots_v2 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 't'`,
        )
      ).first().get('ttl') as number;
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(4);
      expect((await recoverStates(p)).get('t')?.state).toEqual({ n: 1 });

      const deadline = Date.now() + 14_000;
      let left = Number.POSITIVE_INFINITY;
      while (Date.now() < deadline && left > 0) {
        await new Promise((r) => setTimeout(r, 250));
        const keys: string[] = [];
        for await (const k of short.keys!.list(P0)) keys.push(k);
        const events: unknown[] = [];
        for await (const e of short.journal!.read(P0, 't')) events.push(e);
        left = keys.length + events.length + ((await short.snapshots!.read(P0, 't')) ? 1 : 0);
      }
      expect(left).toBe(0);
    } finally {
      await closeAll(
        () => short.close(),
        () => dropKeyspace(ttlKeyspace),
      );
    }
  });
});

describe('CassandraJournalStore', () => {
  test('appends out of order read back in offset order, with headers and null values; delete empties it', async () => {
    const journal = backend.journal!;
    await journal.append(P0, 'j', [event('j', 7, { v: 7 }, { h: Buffer.from('bytes'), many: ['x', Buffer.from('y')] })]);
    await journal.append(P0, 'j', [event('j', 3, { v: 3 }, { s: 'text' }), event('j', 5, null)]);
    await journal.append(P0, 'j', [event('j', 5, null)]); // a retried append rewrites the same row
    const events: JournalEvent<unknown>[] = [];
    for await (const e of journal.read(P0, 'j')) events.push(e);
    expect(events.map((e) => e.offset)).toEqual(['3', '5', '7']);
    expect(events.map((e) => e.value)).toEqual([{ v: 3 }, null, { v: 7 }]);
    expect(events[0]).toEqual(event('j', 3, { v: 3 }, { s: 'text' }));
    expect(events[2]!.headers).toEqual({ h: 'bytes', many: 'y' });

    await journal.delete(P0, 'j');
    const after: unknown[] = [];
    for await (const e of journal.read(P0, 'j')) after.push(e);
    expect(after).toEqual([]);
  });

  test('journal-mode recovery replays each key\'s events', async () => {
    const jks = keyspaceName('kft_journal');
    const jb = await startBackend<State>(jks, { mode: 'journal' });
    try {
      const p = await jb.forPartition({ ...P0, generation: 1, committer: new InMemoryOffsetCommitter() });
      await p.write({
        writes: [
          { key: 'x', events: [event('x', 1, 1), event('x', 2, 2)], addKey: true },
          { key: 'y', events: [event('y', 3, 3)], addKey: true },
        ],
      });
      await p.write({ writes: [{ key: 'x', events: [event('x', 4, 4)] }] });
      const recovered = await recoverStates(p);
      expect(new Map([...recovered].map(([k, v]) => [k, v.events]))).toEqual(new Map([['x', 3], ['y', 1]]));
      expect(p.lastRecovery).toMatchObject({ keysListed: 2, keysRecovered: 2, journalEvents: 4, done: true });
      expect(jb.snapshots).toBeUndefined();
    } finally {
      await closeAll(
        () => jb.close(),
        () => dropKeyspace(jks),
      );
    }
  });
});

describe('CassandraKeyStore and recovery', () => {
  test('recovery lists exactly the partition\'s keys (by a scan of the table, and across segments), not other partitions\', topics\' or groups\'', async () => {
    // Hashed names: Java's String.hashCode puts similar names (key-1, key-2, …) in neighbouring
    // segments, and the point is to cover all of them, the first and last listing chunks included.
    const keys0 = Array.from({ length: 2000 }, (_, i) => `user-${createHash('sha1').update(String(i)).digest('hex').slice(0, 12)}`);
    const keys1 = keys0.slice(0, 200); // same names, other partition
    const keysOther = Array.from({ length: 100 }, (_, i) => `other-${i}`);
    const committer = new InMemoryOffsetCommitter();
    const put = (keys: string[], n: number) =>
      keys.map((key, i) => ({ key, snapshot: { state: { n: n + i }, offset: i }, addKey: true }));

    const p0 = await backend.forPartition({ ...R0, generation: 1, committer });
    await p0.write({ writes: put(keys0, 0), commitOffset: 600 });
    await (await backend.forPartition({ ...R1, generation: 1, committer })).write({ writes: put(keys1, 10_000) });
    await (await backend.forPartition({ ...OTHER, generation: 1, committer })).write({ writes: put(keysOther, 20_000) });
    // Another application and another group on the same tables.
    const otherApp = await startBackend<State>(keyspace, { applicationId: 'app2', mode: 'journal+snapshots' });
    const otherGroup = await startBackend<State>(keyspace, { groupId: 'group2', mode: 'journal+snapshots' });
    try {
      await (await otherApp.forPartition({ ...R0, generation: 1, committer })).write({ writes: put(['intruder-a'], 0) });
      await (await otherGroup.forPartition({ ...R0, generation: 1, committer })).write({ writes: put(['intruder-g'], 0) });
      expect(otherApp.schema.created).toEqual([]); // the schema was there already
    } finally {
      await closeAll(
        () => otherApp.close(),
        () => otherGroup.close(),
      );
    }
    expect(committer.committed(R0)).toBe(600);

    const progress: unknown[] = [];
    const registry = new Registry();
    // Listed by a scan of the table (it holds fewer rows than this), and below by its segments.
    const measured = await startBackend<State>(keyspace, { mode: 'journal+snapshots', metrics: FlowMetrics.of(registry), flowName: 'sales', keyScanRows: 1_000_000 });
    cassandra.defer(() => measured.close());
    const fresh = await measured.forPartition({ ...R0, generation: 2, committer, onProgress: (p) => progress.push(p) });
    const recovered = await recoverStates(fresh);
    const expected = new Set(keys0);
    expect(new Set(recovered.keys())).toEqual(expected);
    for (const [i, key] of keys0.entries()) expect(recovered.get(key)).toMatchObject({ state: { n: i }, offset: i });
    expect(fresh.lastRecovery).toMatchObject({ topic: 'recovery', partition: 0, keysListed: expected.size, keysRecovered: expected.size, done: true });
    expect(progress.at(-1)).toEqual(fresh.lastRecovery);
    expect(fresh.restoreProgress()).toEqual({ read: expected.size, unit: 'keys', fraction: 1 });
    const recoveredKeys = (await registry.getSingleMetric('kafka_flow_cassandra_recovered_keys_total')!.get()).values;
    expect(recoveredKeys).toEqual([{ labels: { flow: 'sales', topic: 'recovery', partition: '0' }, value: expected.size }]);

    // The keys really are spread over the 10,000 segments, into every 100-segment listing chunk.
    const segments = keys0.map((k) => keySegment(k, 10_000));
    expect(new Set(segments.map((s) => Math.floor(s / 100))).size).toBe(100);
    const p1Keys: string[] = [];
    for await (const k of backend.keys!.list(R1)) p1Keys.push(k);
    expect(p1Keys.sort()).toEqual([...keys1].sort());

    // The same keys listed segment by segment (a table past keyScanRows) as by the scan above.
    const bySegments = await startBackend<State>(keyspace, { mode: 'journal+snapshots', keyScanRows: 0 });
    cassandra.defer(() => bySegments.close());
    const shares: number[] = [];
    const listed: string[] = [];
    for await (const k of bySegments.keys!.list(R0, (s) => shares.push(s))) listed.push(k);
    expect(new Set(listed)).toEqual(expected);
    expect(listed).toHaveLength(expected.size);
    expect(shares).toHaveLength(100);
  });

  test('batched recovery reads (key IN …) find what one-key-per-query reads find: snapshots, delete markers, listed keys without a row', async () => {
    const R2 = { topic: 'recovery', partition: 2 };
    const keys = Array.from({ length: 250 }, (_, i) => `batch-${createHash('sha1').update(String(i)).digest('hex').slice(0, 10)}`);
    const committer = new InMemoryOffsetCommitter();
    const p2 = await backend.forPartition({ ...R2, generation: 1, committer });
    await p2.write({ writes: keys.map((key, i) => ({ key, snapshot: { state: { n: i }, offset: i }, addKey: true })) });
    // Every 10th key deleted (a delete marker stays), and one listed key loses its row behind the
    // backend's back (as a TTL would): listed, not recovered.
    await p2.write({ writes: keys.filter((_, i) => i % 10 === 0).map((key, i) => ({ key, delete: { offset: 1000 + i } })) });
    await cassandra.raw.execute(
      `DELETE FROM ${keyspace}.snapshots_v2 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'recovery' AND partition = 2 AND key = ?`,
      [keys[7]],
      { prepare: true },
    );
    const recoverWith = async (recoveryBatchSize: number) => {
      const b = await startBackend<State>(keyspace, { mode: 'journal+snapshots', recoveryBatchSize });
      cassandra.defer(() => b.close());
      const persistence = await b.forPartition({ ...R2, generation: 2, committer });
      const found = new Map<string, unknown>();
      for await (const k of persistence.recover()) found.set(k.key, k.snapshot ?? k.deleted);
      return { found, report: persistence.lastRecovery };
    };
    const batched = await recoverWith(100);
    const single = await recoverWith(1);
    expect(batched.found).toEqual(single.found);
    expect(batched.found.size).toBe(249);
    expect(batched.found.get(keys[0]!)).toEqual({ offset: 1000 });
    expect(batched.found.get(keys[10]!)).toEqual({ offset: 1001 });
    expect(batched.found.get(keys[1]!)).toEqual({ state: { n: 1 }, offset: 1 });
    expect(batched.found.has(keys[7]!)).toBe(false);
    expect(batched.report).toMatchObject({ keysListed: 250, keysRecovered: 249, keysMissing: 1, done: true });
    expect(single.report).toMatchObject({ keysListed: 250, keysRecovered: 249, keysMissing: 1, done: true });
  });

  test('few segments, listed in uneven chunks, and removed keys are not listed', async () => {
    const fewKeyspace = keyspaceName('kft_segments');
    const few = await startBackend<State>(fewKeyspace, { keySegments: 7, segmentsPerQuery: 3, keyListParallelism: 2, keyScanRows: 0 });
    try {
      const keys = Array.from({ length: 50 }, (_, i) => `s${i}`);
      await few.keys!.add(P0, keys);
      await few.keys!.remove(P0, ['s0', 's1']);
      const listed: string[] = [];
      const shares: number[] = [];
      for await (const k of few.keys!.list(P0, (s) => shares.push(s))) listed.push(k);
      expect(listed.sort()).toEqual(keys.slice(2).sort());
      expect(shares).toEqual([1 / 3, 2 / 3, 1]);
      const segments = await cassandra.raw.execute(`SELECT DISTINCT application_id, group_id, segment FROM ${fewKeyspace}.keys`);
      expect(new Set(segments.rows.map((r) => Number(r.get('segment')))).size).toBe(7);
    } finally {
      await closeAll(
        () => few.close(),
        () => dropKeyspace(fewKeyspace),
      );
    }
  });

  test('a small keys table is listed by one scan of it, one past keyScanRows by its segments (for good), and both list the same keys', async () => {
    const ks = keyspaceName('kft_scan');
    const b = await startBackend<State>(ks, { keySegments: 7, segmentsPerQuery: 3, keyScanRows: 60 });
    const listing = async (partition: typeof P0) => {
      const keys: string[] = [];
      const shares: number[] = [];
      for await (const k of b.keys!.list(partition, (s) => shares.push(s))) keys.push(k);
      return { keys: keys.sort(), shares };
    };
    try {
      const mine = Array.from({ length: 30 }, (_, i) => `m${i}`);
      await b.keys!.add(P0, mine);
      await b.keys!.remove(P0, ['m0']);
      // Other partitions, topics and groups share the table: the scan keeps only this partition's keys.
      await b.keys!.add(P1, ['m1', 'p1']);
      await b.keys!.add(OTHER, ['m2', 'o']);
      await cassandra.raw.execute(`INSERT INTO ${ks}.keys (application_id, group_id, segment, topic, partition, key) VALUES ('app', 'another-group', 1, 'orders', 0, 'g')`);
      // Every listing at once (a worker's partitions recovering together): one of them finds out the table's size.
      const together = await Promise.all([listing(P0), listing(P0), listing(P0)]);
      for (const l of together) expect(l).toEqual({ keys: mine.slice(1).sort(), shares: [1] });
      expect(await listing(P1)).toEqual({ keys: ['m1', 'p1'], shares: [1] });

      // Past 60 rows: segment by segment (three queries of at most three of the seven segments), the same keys.
      await b.keys!.add(P1, Array.from({ length: 40 }, (_, i) => `q${i}`));
      expect(await listing(P0)).toEqual({ keys: mine.slice(1).sort(), shares: [1 / 3, 2 / 3, 1] });
      // The table is not scanned again once it was too big, even when it shrinks back.
      await b.keys!.remove(P1, Array.from({ length: 40 }, (_, i) => `q${i}`));
      expect(await listing(P0)).toEqual({ keys: mine.slice(1).sort(), shares: [1 / 3, 2 / 3, 1] });
    } finally {
      await closeAll(
        () => b.close(),
        () => dropKeyspace(ks),
      );
    }
  });

  test('a statement that fails is a CassandraPersistenceError naming the table, partition and keys', async () => {
    const broken = await startBackend<State>(keyspaceName('kft_broken'), { mode: 'snapshots' });
    const ks = broken.settings.keyspace;
    try {
      await cassandra.raw.execute(`DROP TABLE ${ks}.snapshots_v2`);
      const store = broken.snapshots!.withGeneration(1);
      const write = store.writeBatch(P0, [{ kind: 'put', key: 'lost', snapshot: { state: { n: 1 }, offset: 1 } }]);
      await expect(write).rejects.toBeInstanceOf(CassandraPersistenceError);
      await expect(write).rejects.toThrow(new RegExp(`snapshot write on table ${ks}.snapshots_v2 for topic "orders" partition 0 \\(1 key\\(s\\): #${keyHash('lost')}\\) failed`));
    } finally {
      await closeAll(
        () => broken.close(),
        () => dropKeyspace(ks),
      );
    }
  });
});
