
import { ManualClock } from '../../../flow/clock';
import type { Fold } from '../../../flow/fold';
import { PartitionFlow } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import type { PartitionPersistence } from '../../../flow/ports';
import type { CassandraBackend } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { OffsetCommitter } from '../../../persistence/offset-committer';
import { cassandraScope, closeAll, } from '../../support/servers';
import { numberCodec, startBackend } from './support';

const cassandra = cassandraScope('kft_marker_ttl');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };
/** A short TTL (whole seconds), long enough that a persist and a read on a busy machine fit in it; the test waits past it. */
const FENCE_ROW_TTL = '3s';
const PAST_TTL_MS = 4500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The key's row as stored; `bucket` in the by-partition layout. */
async function storedRow(table: string, key: string, bucket?: number) {
  const rs = await cassandra.raw.execute(
    `SELECT offset, generation, value, TTL(generation) AS ttl FROM ${keyspace}.${table} WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND ${bucket === undefined ? '' : 'bucket = ? AND '}key = ?`,
    bucket === undefined ? [key] : [bucket, key],
    { prepare: true },
  );
  const row = rs.first();
  if (!row) return undefined;
  const offset = row.get('offset');
  return { offset: offset === null ? null : Number(offset), hasValue: row.get('value') !== null, ttl: row.get('ttl') as number | null };
}

/** A sum per key; a record of value 0 deletes the key (the fold returns no state). */
const sumOrDelete: Fold<number, number> = (state, record) => (record.value === 0 ? undefined : (state ?? 0) + record.value);

function sumFlow(persistence: PartitionPersistence<number, number>, assignedAt: string) {
  const clock = new ManualClock(1_700_000_000_000);
  const flow = new PartitionFlow<number, number>({
    flow: 'sum',
    topic: P.topic,
    partition: P.partition,
    assignedAt,
    fold: sumOrDelete,
    codec: numberCodec,
    persistence,
    mode: 'snapshots',
    // A failed offset commit is logged and retried (the partition goes on), as in a long outage
    // of the group coordinator.
    timers: timerPolicy({ persistPeriodically: { fireEvery: 1000, persistEvery: 1000, ignorePersistErrors: true } }),
    clock,
  });
  const step = async (records: Array<[offset: number, value: number]>) => {
    await flow.handleBatch(records.map(([offset, value]) => ({ offset: String(offset), key: Buffer.from('x'), value: Buffer.from(String(value)), timestamp: '0' })));
    clock.advance(2000);
    flow.triggerTimers();
    return flow.persist(clock.now(), 'periodic');
  };
  return { flow, step };
}

async function recovered(backend: CassandraBackend<number, number>) {
  const persistence = await backend.forPartition({ ...P, generation: 1, committer: new InMemoryOffsetCommitter() });
  const out = new Map<string, unknown>();
  for await (const k of persistence.recover()) out.set(k.key, k.snapshot ?? k.deleted);
  return out;
}

test.each(['kafka-flow', 'by-partition'] as const)(
  "layout %s: a delete marker outlives fenceRowTtl until the commit passes it; the purge's fence row then expires and the key is written again",
  async (layout) => {
    const tables = { snapshots: `snap_${layout.replace('-', '_')}`, keys: `keys_${layout.replace('-', '_')}` };
    const options = { tables, layout, fenceRowTtl: FENCE_ROW_TTL } as const;
    const [owner, reader] = [await startBackend<number, number>(keyspace, options), await startBackend<number, number>(keyspace, options)];
    try {
      const group = new InMemoryOffsetCommitter();
      let commitsFail = true;
      const committer: OffsetCommitter = {
        commit: async (partition, offset) => {
          if (commitsFail) throw new Error('the group coordinator is unreachable (test)');
          await group.commit(partition, offset);
        },
      };
      const { flow, step } = sumFlow(await owner.forPartition({ ...P, generation: 1, committer }), '0');
      await flow.recover();
      await step([[0, 3]]); // x = 3: its row is INSERTed
      await step([[1, 0]]); // x deleted at offset 1: its marker
      expect(group.committed(P)).toBeUndefined(); // the commits failed: a replay starts at 0
      const bucket = layout === 'by-partition' ? owner.snapshots!.bucketOf('x') : undefined;
      expect(await storedRow(tables.snapshots, 'x', bucket)).toMatchObject({ offset: 1, hasValue: false });

      await sleep(PAST_TTL_MS);
      // The marker still stands, without a TTL: a replay from offset 0 skips x's records up to 1.
      expect(await storedRow(tables.snapshots, 'x', bucket)).toEqual({ offset: 1, hasValue: false, ttl: null });
      expect((await recovered(reader)).get('x')).toEqual({ offset: 1 }); // its delete marker

      // The coordinator is back: the commit passes the marker, and the next persist purges it.
      commitsFail = false;
      await step([]);
      expect(group.committed(P)).toBe(2);
      await step([]);
      const fence = await storedRow(tables.snapshots, 'x', bucket);
      expect(fence).toMatchObject({ offset: 1, hasValue: false });
      expect(fence!.ttl).toBeGreaterThan(0); // the fence row lives fenceRowTtl
      if (layout === 'kafka-flow') expect((await recovered(reader)).has('x')).toBe(false); // no longer listed

      await sleep(PAST_TTL_MS);
      // Expired: read as no row, recovered as nothing (not a corrupt row), …
      expect(await reader.snapshots!.read(P, 'x')).toBeUndefined();
      expect((await recovered(reader)).has('x')).toBe(false);
      // … and the key can be written again, by its owner and by a fresh process alike.
      await step([[5, 2]]);
      expect(flow.failed).toBeUndefined();
      expect(await reader.snapshots!.read(P, 'x')).toEqual({ state: 2, offset: 5 });
      expect(group.committed(P)).toBe(6);
    } finally {
      await closeAll(
        () => owner.close(),
        () => reader.close(),
      );
    }
  },
);

test("an expired row's primary key left behind by earlier versions reads as no row and is taken over by any writer", async () => {
  const table = 'ghosts';
  const writer = await startBackend<number, number>(keyspace, { tables: { snapshots: table, keys: 'ghost_keys' } });
  try {
    const store = writer.snapshots!.withGeneration(3);
    expect(await store.writeBatch(P, [{ kind: 'put', key: 'g', snapshot: { state: 1, offset: 1 } }])).toEqual(['applied']);
    // What a marker with a TTL left when it expired: every cell gone, the INSERT's primary key not.
    await cassandra.raw.execute(
      `UPDATE ${keyspace}.${table} USING TTL 1 SET offset = 2, created = toTimestamp(now()), metadata = null, value = null, generation = 3 WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'g'`,
    );
    await sleep(PAST_TTL_MS);
    expect(await storedRow(table, 'g')).toEqual({ offset: null, hasValue: false, ttl: null });
    expect(await store.read(P, 'g')).toBeUndefined();
    expect(await store.readMany(P, ['g', 'h'])).toEqual([]);
    // Taken over from a process that has not seen the row (INSERT … IF NOT EXISTS, refused) …
    const other = await startBackend<number, number>(keyspace, { tables: { snapshots: table, keys: 'ghost_keys' } });
    try {
      expect(await other.snapshots!.withGeneration(2).writeBatch(P, [{ kind: 'put', key: 'g', snapshot: { state: 4, offset: 4 } }])).toEqual(['applied']);
    } finally {
      await other.close();
    }
    // … and by the writer that knew it (a conditional UPDATE first): generation 3 is newer.
    expect(await store.writeBatch(P, [{ kind: 'put', key: 'g', snapshot: { state: 7, offset: 7 } }])).toEqual(['applied']);
    expect(await store.read(P, 'g')).toEqual({ state: 7, offset: 7 });
  } finally {
    await writer.close();
  }
});

test("with ttl.keys, a delete marker's keys-table entry does not expire before the marker is purged (the kafka-flow layout lists markers from it)", async () => {
  const tables = { snapshots: 'keyttl_snapshots', keys: 'keyttl_keys' };
  const options = { tables, ttl: { keys: '1s' } } as const;
  const [owner, reader] = [await startBackend<number, number>(keyspace, options), await startBackend<number, number>(keyspace, options)];
  try {
    const group = new InMemoryOffsetCommitter();
    let commitsFail = true;
    const committer: OffsetCommitter = {
      commit: async (partition, offset) => {
        if (commitsFail) throw new Error('the group coordinator is unreachable (test)');
        await group.commit(partition, offset);
      },
    };
    const { flow, step } = sumFlow(await owner.forPartition({ ...P, generation: 1, committer }), '0');
    await flow.recover();
    await step([[0, 3]]);
    await step([[1, 0]]); // the marker; the commit fails
    await sleep(PAST_TTL_MS);
    // Past ttl.keys: the marker is still listed, so a replay from offset 0 skips x's records.
    expect((await recovered(reader)).get('x')).toEqual({ offset: 1 });
    commitsFail = false;
    await step([]);
    await step([]); // purged: the key leaves the keys table
    expect((await recovered(reader)).has('x')).toBe(false);
    const listedKeys: string[] = [];
    for await (const k of reader.keys!.list(P)) listedKeys.push(k);
    expect(listedKeys).toEqual([]);
  } finally {
    await closeAll(
      () => owner.close(),
      () => reader.close(),
    );
  }
});
