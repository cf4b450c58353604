
import { Registry } from 'prom-client';
import { FlowMetrics } from '../../../flow/metrics';
import { type CassandraBackend, CassandraFencingMismatchError, type CassandraPartitionPersistence, CassandraWriteRefusedError } from '../../../persistence/cassandra';
import { fenceTimestamp } from '../../../persistence/cassandra/write-timestamp';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../../../core/fence-errors';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { OffsetCommitter } from '../../../persistence/offset-committer';
import type { SnapshotWrite } from '../../../persistence/snapshot-store';
import type { TopicPartition } from '../../../core/persistence-types';
import { cassandraScope, closeAll, } from '../../support/servers';
import { expectedTallies, recoverStates, roundRobin, startBackend, step, type Tally, tallyFlow } from './support';

const cassandra = cassandraScope('kft_fencing');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };

const put = (key: string, offset: number, n = offset): SnapshotWrite<{ n: number }> => ({
  kind: 'put',
  key,
  snapshot: { state: { n }, offset },
});
const del = (key: string, offset: number): SnapshotWrite<{ n: number }> => ({ kind: 'delete', key, offset });

async function storedRow(table: string, key: string) {
  const rs = await cassandra.raw.execute(
    `SELECT offset, generation, value, TTL(offset) AS ttl FROM ${keyspace}.${table} WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = ?`,
    [key],
    { prepare: true },
  );
  const row = rs.first();
  if (!row) return undefined;
  return {
    offset: Number(row.get('offset')),
    generation: row.get('generation') === null ? null : Number(row.get('generation')),
    hasValue: row.get('value') !== null,
    ttl: row.get('ttl') as number | null,
  };
}

describe("fencing 'lwt': conditional writes ordered by (generation, offset)", () => {
  const registry = new Registry();
  let a: CassandraBackend<{ n: number }, unknown>;
  let b: CassandraBackend<{ n: number }, unknown>;

  beforeAll(async () => {
    // Two processes: the old owner (generation 1) and the new owner (generation 2), own clients.
    a = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'cond_snapshots' }, metrics: FlowMetrics.of(registry), flowName: 'old' });
    b = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'cond_snapshots' } });
  });

  afterAll(async () => {
    await closeAll(
      () => a?.close(),
      () => b?.close(),
    );
  });

  test('stale lower offset, stale higher offset, idempotent retry, fenced deletes and no resurrection', async () => {
    const old = a.snapshots!.withGeneration(1);
    const owner = b.snapshots!.withGeneration(2);

    expect(await old.writeBatch(P, [put('k', 10)])).toEqual(['applied']);
    // The new owner's first write: an older generation's row is taken over (compare-and-set).
    expect(await owner.writeBatch(P, [put('k', 20)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [put('k', 15)])).toEqual(['not-applied']); // older offset
    expect(await old.writeBatch(P, [put('k', 30)])).toEqual(['not-applied']); // newer offset, older generation
    expect(await old.writeBatch(P, [del('k', 40)])).toEqual(['not-applied']);
    expect(await owner.writeBatch(P, [put('k', 20)])).toEqual(['applied']); // its own write again: a no-op
    expect(await owner.read(P, 'k')).toEqual({ state: { n: 20 }, offset: 20 });
    expect(await storedRow('cond_snapshots', 'k')).toMatchObject({ offset: 20, generation: 2, hasValue: true });

    // A delete leaves a marker, which is also a fence row (offset and generation, no value, no TTL) …
    expect(await owner.writeBatch(P, [del('k', 25)])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toEqual({ deleted: true, offset: 25 }); // the delete marker
    const fence = await storedRow('cond_snapshots', 'k');
    expect(fence).toMatchObject({ offset: 25, generation: 2, hasValue: false });
    expect(fence!.ttl).toBeNull();
    // … so the stale owner cannot bring the key back, from a fresh session either.
    expect(await old.writeBatch(P, [put('k', 50)])).toEqual(['not-applied']);
    expect(await a.snapshots!.withGeneration(1).writeBatch(P, [put('k', 51)])).toEqual(['not-applied']);
    expect(await old.read(P, 'k')).toEqual({ deleted: true, offset: 25 });
    // The owner can.
    expect(await owner.writeBatch(P, [put('k', 60)])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toEqual({ state: { n: 60 }, offset: 60 });

    expect(a.snapshots!.stats.refused).toBe(5);
    expect(b.snapshots!.stats.refused).toBe(0);
    // Counted: refusals by what was newer, writes by outcome.
    const refusals = (await registry.getSingleMetric('kafka_flow_cassandra_fence_refusals_total')!.get()).values;
    expect(refusals.map((v) => [v.labels.by, v.value])).toEqual([['generation', 5]]);
    expect(refusals[0]!.labels).toMatchObject({ flow: 'old', topic: 'orders', partition: '0' });
    const writes = (await registry.getSingleMetric('kafka_flow_cassandra_snapshot_writes_total')!.get()).values;
    expect(Object.fromEntries(writes.map((v) => [v.labels.outcome, v.value]))).toEqual({ applied: 1, refused: 5 });
  });

  test('a stale owner that got ahead before the new owner\'s first write is overtaken, then refused', async () => {
    const old = a.snapshots!.withGeneration(1);
    const owner = b.snapshots!.withGeneration(2);
    expect(await old.writeBatch(P, [put('j', 100)])).toEqual(['applied']);
    // The new owner recovered j before the stale write and folded less far: it still wins.
    expect(await owner.writeBatch(P, [put('j', 90)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [put('j', 110)])).toEqual(['not-applied']);
    expect(await owner.read(P, 'j')).toEqual({ state: { n: 90 }, offset: 90 });
  });

  test('within a generation, or without one, only a newer offset lands (an older one fails typed: no newer owner wrote)', async () => {
    const one = a.snapshots!.withGeneration(3);
    expect(await one.writeBatch(P, [put('m', 5), put('n', 5)])).toEqual(['applied', 'applied']);
    await expect(one.writeBatch(P, [put('m', 4), put('n', 6)])).rejects.toBeInstanceOf(CassandraWriteRefusedError);
    expect(await one.read(P, 'n')).toEqual({ state: { n: 6 }, offset: 6 }); // the batch's other write landed
    const noGeneration = b.snapshots!.withGeneration(undefined);
    expect(await noGeneration.writeBatch(P, [put('o', 5)])).toEqual(['applied']);
    await expect(noGeneration.writeBatch(P, [put('o', 3), put('o2', 1)])).rejects.toBeInstanceOf(CassandraWriteRefusedError);
    expect(await noGeneration.read(P, 'o2')).toEqual({ state: { n: 1 }, offset: 1 });
    expect(await noGeneration.writeBatch(P, [put('o', 8)])).toEqual(['applied']);
    expect(await storedRow('cond_snapshots', 'o')).toMatchObject({ offset: 8, generation: null });
  });

  test('after the consumer group was recreated (generations restart), a raised fenceEpoch puts the new owners ahead', async () => {
    const before = b.snapshots!.withGeneration(57);
    expect(await before.writeBatch(P, [put('epoch', 10)])).toEqual(['applied']);
    const restarted = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'cond_snapshots' } });
    const raised = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'cond_snapshots' }, fenceEpoch: 1 });
    try {
      const committer = new InMemoryOffsetCommitter();
      const refused = await restarted.forPartition({ ...P, generation: 1, committer });
      expect((await refused.write({ writes: [{ key: 'epoch', snapshot: { state: { n: 11 }, offset: 11 } }] })).statuses).toEqual(['not-applied']);
      const ahead = await raised.forPartition({ ...P, generation: 1, committer });
      expect(ahead.snapshots!.generation).toBe(2 ** 32 + 1);
      expect((await ahead.write({ writes: [{ key: 'epoch', snapshot: { state: { n: 11 }, offset: 11 } }] })).statuses).toEqual(['applied']);
    } finally {
      await closeAll(
        () => restarted.close(),
        () => raised.close(),
      );
    }
  });

  test("rows written without a generation (kafka-flow, fencing 'none') are taken over by a fenced writer", async () => {
    const plain = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'cond_snapshots' }, fencing: 'none' });
    try {
      await plain.snapshots!.withGeneration(7).writeBatch(P, [put('legacy', 500)]);
      expect(await storedRow('cond_snapshots', 'legacy')).toMatchObject({ offset: 500, generation: null });
      expect(await b.snapshots!.withGeneration(2).writeBatch(P, [put('legacy', 400)])).toEqual(['applied']);
      expect(await storedRow('cond_snapshots', 'legacy')).toMatchObject({ offset: 400, generation: 2 });
    } finally {
      await plain.close();
    }
  });
});

/**
 * kafka-flow #732 end to end. A owns the partition (generation 1), folds offsets 0–99 and
 * persists. A rebalance gives it to B (generation 2): B recovers, folds 100–199, persists and
 * commits 200. A has not noticed: it folds 100–149 and flushes. C then recovers the partition.
 */
async function overlap(fencing: 'lwt' | 'timestamp' | 'none') {
  const table = `overlap_${fencing}`;
  const tables = { snapshots: table, keys: `${table}_keys` };
  const all = roundRobin(20, 0, 200);
  const group = new GenerationFencedGroup(); // the group's committed offsets, fenced like Kafka's
  const backends: CassandraBackend<Tally, number>[] = [];
  const start = async () => {
    const backend = await startBackend<Tally, number>(keyspace, { tables, fencing });
    backends.push(backend);
    return backend;
  };
  try {
    const [aBackend, bBackend, cBackend] = [await start(), await start(), await start()];
    const aPersistence = await aBackend.forPartition({ ...P, generation: 1, committer: group.member(1) });
    const a = tallyFlow(aPersistence, '0');
    await a.flow.recover();
    await step(a.flow, a.clock, all.slice(0, 100));
    expect(group.committed(P)).toBe(100);

    const bPersistence = await bBackend.forPartition({ ...P, generation: 2, committer: group.member(2) });
    const b = tallyFlow(bPersistence, String(group.committed(P)));
    expect(await b.flow.recover()).toBe(20);
    await step(b.flow, b.clock, all.slice(100, 200));
    expect(group.committed(P)).toBe(200);

    // The stale owner's late flush.
    const stale = await step(a.flow, a.clock, all.slice(100, 150)).then(
      (result) => ({ result, error: undefined as unknown }),
      (error: unknown) => ({ result: undefined, error }),
    );

    const cPersistence: CassandraPartitionPersistence<Tally, number> = await cBackend.forPartition({ ...P, generation: 3, committer: group.member(3) });
    const recovered = new Map([...(await recoverStates(cPersistence))].map(([k, v]) => [k, v.state]));
    return { recovered, stale, a, expected: expectedTallies(all), staleView: expectedTallies(all.slice(0, 150)) };
  } finally {
    await closeAll(...backends.map((b) => () => b.close()));
  }
}

/**
 * The group's committed offsets with Kafka's generation fence (the real one is tested in
 * offset-committer.test.ts): a member's commit is refused once a newer generation has committed.
 */
class GenerationFencedGroup {
  private readonly offsets = new InMemoryOffsetCommitter();
  private latest = 0;

  member(generation: number): OffsetCommitter {
    return {
      commit: async (partition, offset) => {
        if (generation < this.latest) throw new SnapshotWriteFencedError(partition.topic, partition.partition, `generation ${generation} is stale`);
        this.latest = generation;
        await this.offsets.commit(partition, offset);
      },
    };
  }

  committed(partition: TopicPartition): number | undefined {
    return this.offsets.committed(partition);
  }
}

describe('the #732 overlap: a stale owner flushes after the new owner wrote newer state', () => {
  test("fencing 'none': the stale flush lands and the next recovery loads state that lost 50 records", async () => {
    const { recovered, stale, expected, staleView } = await overlap('none');
    // Kafka refuses the stale offset commit, but the snapshot writes before it have landed.
    expect(stale.error).toBeInstanceOf(SnapshotWriteFencedError);
    expect(recovered).toEqual(staleView); // what the stale owner had, not what was committed
    expect(recovered).not.toEqual(expected);
    let lost = 0;
    for (const [key, tally] of recovered) lost += expected.get(key)!.count - tally!.count;
    expect(lost).toBe(50); // records 150–199: committed by B, missing from the state C loads
  });

  test("fencing 'lwt': the stale flush is refused (SnapshotWriteConflictError, the partition stops) and recovery loads the committed state", async () => {
    const { recovered, stale, a, expected } = await overlap('lwt');
    expect(stale.error).toBeInstanceOf(SnapshotWriteConflictError);
    expect((stale.error as SnapshotWriteConflictError).keys).toHaveLength(20);
    expect(a.flow.failed).toBe(stale.error); // stopped until its next assignment
    expect(recovered).toEqual(expected);
  });
});

describe("fencing 'timestamp': plain writes ordered by the owner's generation in their write timestamps", () => {
  const tables = { snapshots: 'ts_snapshots', keys: 'ts_keys' };
  let a: CassandraBackend<{ n: number }, unknown>;
  let b: CassandraBackend<{ n: number }, unknown>;
  const purge = (key: string, offset: number): SnapshotWrite<{ n: number }> => ({ kind: 'purge', key, offset });
  const listed = async (backend: CassandraBackend<{ n: number }, unknown>) => {
    const keys: string[] = [];
    for await (const k of backend.keys!.list(P)) keys.push(k);
    return keys.sort();
  };
  const writetime = async (key: string) => {
    const rs = await cassandra.raw.execute(
      `SELECT WRITETIME(offset) AS t FROM ${keyspace}.ts_snapshots WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = ?`,
      [key],
      { prepare: true },
    );
    return BigInt(String(rs.first()!.get('t')));
  };

  beforeAll(async () => {
    // Two processes: the old owner and the new owner, own clients.
    a = await startBackend<{ n: number }>(keyspace, { tables, fencing: 'timestamp' });
    b = await startBackend<{ n: number }>(keyspace, { tables, fencing: 'timestamp' });
  });

  afterAll(async () => {
    await closeAll(
      () => a?.close(),
      () => b?.close(),
    );
  });

  test("a stale owner's puts, deletes and purges land after the new owner's and change nothing: not its rows, not the keys listed", async () => {
    const old = a.snapshots!.withGeneration(1);
    const owner = b.snapshots!.withGeneration(2);
    expect(await old.writeBatch(P, [{ ...put('k', 10), newKey: true }])).toEqual(['applied']);
    expect(await owner.writeBatch(P, [put('k', 20)])).toEqual(['applied']);
    // The stale owner's statements are applied, and shadowed: what it cannot see, it cannot change.
    expect(await old.writeBatch(P, [put('k', 15)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [put('k', 30)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [del('k', 40)])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toEqual({ state: { n: 20 }, offset: 20 });
    expect(await storedRow('ts_snapshots', 'k')).toMatchObject({ offset: 20, generation: 2, hasValue: true });
    expect(await writetime('k')).toBe(fenceTimestamp(0, 2, 0));

    // The owner's delete marker stands against the stale owner's put and purge …
    expect(await owner.writeBatch(P, [del('k', 25)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [put('k', 50)])).toEqual(['applied']);
    expect(await old.writeBatch(P, [purge('k', 50)])).toEqual(['applied']);
    expect(await b.snapshots!.withGeneration(2).read(P, 'k')).toEqual({ deleted: true, offset: 25 });
    expect(await storedRow('ts_snapshots', 'k')).toMatchObject({ offset: 25, generation: 2, hasValue: false, ttl: null });
    expect(await listed(b)).toEqual(['k']); // the stale purge did not unlist it
    // … and the owner's own later writes land (each batch after the last in the order).
    expect(await owner.writeBatch(P, [put('k', 60)])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toEqual({ state: { n: 60 }, offset: 60 });
    expect(await owner.writeBatch(P, [del('k', 70)])).toEqual(['applied']);
    expect(await owner.writeBatch(P, [purge('k', 70)])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toBeUndefined();
    expect(await listed(b)).toEqual([]);
    // A purged key's tombstone is the fence: the stale owner cannot bring it back.
    expect(await old.writeBatch(P, [{ ...put('k', 80), newKey: true }])).toEqual(['applied']);
    expect(await owner.read(P, 'k')).toBeUndefined();
    expect(await listed(b)).toEqual([]);
    expect(a.snapshots!.stats.refused + b.snapshots!.stats.refused).toBe(0); // nothing is refused: shadowed
  });

  test('within one generation a later batch wins over an earlier one that lands late', async () => {
    const owner = b.snapshots!.withGeneration(5);
    expect(await owner.writeBatch(P, [{ ...put('late', 1), newKey: true }])).toEqual(['applied']);
    expect(await owner.writeBatch(P, [put('late', 2)])).toEqual(['applied']);
    // The first batch's statement again, as a retry that reached the node after the second batch.
    await cassandra.raw.execute(
      `UPDATE ${keyspace}.ts_snapshots USING TIMESTAMP ? SET offset = 1, value = ? WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'late'`,
      [fenceTimestamp(0, 5, 0).toString(), Buffer.from(JSON.stringify({ n: 1 }))],
      { prepare: true, hints: ['bigint', 'blob'] },
    );
    expect(await owner.read(P, 'late')).toEqual({ state: { n: 2 }, offset: 2 });
    // A recovery again in the same generation (a new view of the store) goes on after the last batch.
    expect(await b.snapshots!.withGeneration(5).writeBatch(P, [put('late', 3)])).toEqual(['applied']);
    expect(await writetime('late')).toBe(fenceTimestamp(0, 5, 2));
  });

  test("rows written before with clock timestamps ('lwt', 'none', kafka-flow) are taken over; an 'lwt' flow refuses a partition written this way", async () => {
    const lwt = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'ts_legacy', keys: 'ts_legacy_keys' } });
    const ts = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: 'ts_legacy', keys: 'ts_legacy_keys' }, fencing: 'timestamp' });
    try {
      const committer = new InMemoryOffsetCommitter();
      const before = await lwt.forPartition({ ...P, generation: 9, committer });
      await before.write({ writes: [{ key: 'legacy', snapshot: { state: { n: 1 }, offset: 100 }, addKey: true }] });
      // The switch: generation 1 of the timestamp fence is above any clock's row.
      const after = await ts.forPartition({ ...P, generation: 1, committer });
      expect((await after.write({ writes: [{ key: 'legacy', snapshot: { state: { n: 2 }, offset: 50 } }] })).statuses).toEqual(['applied']);
      expect(new Map([...(await recoverStates(await ts.forPartition({ ...P, generation: 2, committer })))].map(([k, v]) => [k, v.state]))).toEqual(
        new Map([['legacy', { n: 2 }]]),
      );
      // Back to 'lwt' would write below those timestamps, silently: refused, typed.
      const back = await lwt.forPartition({ ...P, generation: 10, committer });
      await expect(recoverStates(back)).rejects.toBeInstanceOf(CassandraFencingMismatchError);
    } finally {
      await closeAll(
        () => lwt.close(),
        () => ts.close(),
      );
    }
  });

  test("the #732 overlap: the stale flush is shadowed, its offset commit refused, and recovery loads the committed state", async () => {
    const { recovered, stale, expected } = await overlap('timestamp');
    expect(stale.error).toBeInstanceOf(SnapshotWriteFencedError);
    expect(recovered).toEqual(expected);
  });
});
