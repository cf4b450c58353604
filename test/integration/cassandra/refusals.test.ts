// Fenced writes the store refuses although no newer owner exists, on the real Cassandra with real
// second clients: only a refusal because a newer generation wrote is a fence ('not-applied', the
// partition waits for its next assignment); a refusal by offset within a generation (the owner's
// own earlier write that landed late), a put over a delete marker at its own offset, and a row
// that keeps changing under the write are CassandraWriteRefusedError — a failure the partition
// recovers from on its owner, from what landed.
import type { types } from 'cassandra-driver';
import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../../../core/fence-errors';
import { jsonCodec } from '../../../core/codec/json';
import { PersistFailedError } from '../../../flow/errors';
import {
  type CassandraBackend,
  CassandraSession,
  CassandraSnapshotStore,
  CassandraWriteRefusedError,
  MAX_ROUNDS,
} from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { SnapshotWrite } from '../../../persistence/snapshot-store';
import { cassandraScope, closeAll, } from '../../support/servers';
import { expectedTallies, recoverStates, roundRobin, startBackend, step, type Tally, tallyFlow } from './support';

const cassandra = cassandraScope('kft_refusals');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };
const TABLE = 'refusal_snapshots';
let a: CassandraBackend<{ n: number }, unknown>;
let b: CassandraBackend<{ n: number }, unknown>;

beforeAll(async () => {
  // Two processes on their own clients.
  a = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: TABLE } });
  cassandra.defer(() => a.close());
  b = await startBackend<{ n: number }>(keyspace, { tables: { snapshots: TABLE } });
  cassandra.defer(() => b.close());
});

const put = (key: string, offset: number, n = offset): SnapshotWrite<{ n: number }> => ({ kind: 'put', key, snapshot: { state: { n }, offset } });
const del = (key: string, offset: number): SnapshotWrite<{ n: number }> => ({ kind: 'delete', key, offset });

async function storedRow(key: string, table = TABLE, partition = 0) {
  const rs = await cassandra.raw.execute(
    `SELECT offset, generation, value FROM ${keyspace}.${table} WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = ? AND key = ?`,
    [partition, key],
    { prepare: true },
  );
  const row = rs.first();
  if (!row) return undefined;
  return { offset: Number(row.get('offset')), generation: row.get('generation') === null ? null : Number(row.get('generation')), hasValue: row.get('value') !== null };
}

async function refusal(p: Promise<unknown>): Promise<CassandraWriteRefusedError> {
  const err = await p.then(
    (value) => ({ resolved: value }),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CassandraWriteRefusedError);
  return err as CassandraWriteRefusedError;
}

describe('refusals within a generation are failures, not fences', () => {
  test("the owner's own earlier write landed late at a newer offset: the older write fails typed, not 'not-applied'", async () => {
    const mine = a.snapshots!.withGeneration(4);
    // The same owner's earlier statement whose Paxos round completed after the client gave up on
    // it: a real second client of the same generation.
    const late = b.snapshots!.withGeneration(4);
    expect(await mine.writeBatch(P, [put('t', 10)])).toEqual(['applied']);
    expect(await late.writeBatch(P, [put('t', 30)])).toEqual(['applied']);
    const err = await refusal(mine.writeBatch(P, [put('t', 20), put('t2', 20)]));
    expect(err.keys).toEqual(['t']);
    expect(err.reasons).toEqual(['offset']);
    expect(err).not.toBeInstanceOf(SnapshotWriteFencedError);
    expect(await storedRow('t')).toMatchObject({ offset: 30, generation: 4, hasValue: true });
    // A delete below the stored offset, within the generation, too.
    await refusal(mine.writeBatch(P, [del('t', 25)]));
    // Offsets only (no generation): nothing says a newer owner wrote, so it is a failure too.
    const plain = b.snapshots!.withGeneration(undefined);
    expect(await plain.writeBatch(P, [put('u', 5)])).toEqual(['applied']);
    expect((await refusal(plain.writeBatch(P, [put('u', 3)]))).reasons).toEqual(['offset']);
  });

  test("a newer generation's row still refuses as a fence ('not-applied'), and wins over failures in the same batch", async () => {
    const old = a.snapshots!.withGeneration(5);
    const owner = b.snapshots!.withGeneration(6);
    expect(await old.writeBatch(P, [put('f', 10), put('g', 10)])).toEqual(['applied', 'applied']);
    expect(await owner.writeBatch(P, [put('f', 20)])).toEqual(['applied']);
    expect(await b.snapshots!.withGeneration(5).writeBatch(P, [put('g', 40)])).toEqual(['applied']); // generation 5's own late write
    // f: a newer generation wrote (a fence); g: generation 5 at a newer offset (a failure alone).
    expect(await old.writeBatch(P, [put('f', 30), put('g', 30)])).toEqual(['not-applied', 'not-applied']);
  });

  test('a put at the offset of a delete marker is not "already landed": it fails typed and the marker stays', async () => {
    const owner = a.snapshots!.withGeneration(7);
    expect(await owner.writeBatch(P, [put('m', 5)])).toEqual(['applied']);
    expect(await owner.writeBatch(P, [del('m', 10)])).toEqual(['applied']);
    // Known row: the conditional UPDATE is refused (offset 10 is not < 10).
    expect((await refusal(owner.writeBatch(P, [put('m', 10)]))).reasons).toEqual(['marker']);
    // Unknown row (another process): INSERT … IF NOT EXISTS is refused with the whole row.
    expect((await refusal(b.snapshots!.withGeneration(7).writeBatch(P, [put('m', 10)]))).reasons).toEqual(['marker']);
    expect(await storedRow('m')).toMatchObject({ offset: 10, generation: 7, hasValue: false });
    expect(await owner.read(P, 'm')).toEqual({ deleted: true, offset: 10 });
    // Our identical value row again is still done (an idempotent retry), from either path.
    expect(await owner.writeBatch(P, [put('m', 11)])).toEqual(['applied']);
    expect(await owner.writeBatch(P, [put('m', 11)])).toEqual(['applied']);
    expect(await b.snapshots!.withGeneration(7).writeBatch(P, [put('m', 11)])).toEqual(['applied']);
  });

  test('a row kept changing under the write for MAX_ROUNDS statements (a stale owner flushing hard): a failure, not a fence of the newer owner', async () => {
    const stale = b.snapshots!.withGeneration(8);
    let staleOffset = 100;
    expect(await stale.writeBatch(P, [put('c', staleOffset)])).toEqual(['applied']);
    // The newer owner's session: before each of its statements the stale owner (a real second
    // client, older generation) lands a newer offset, so every compare-and-set misses.
    class Interposed extends CassandraSession {
      override async write(query: string, params: unknown[], consistency: Parameters<CassandraSession['write']>[2]): Promise<types.ResultSet> {
        staleOffset++;
        await stale.writeBatch(P, [put('c', staleOffset)]);
        return super.write(query, params, consistency);
      }
    }
    const session = new Interposed(a.session.client, { maxConcurrentReads: 8, maxConcurrentWrites: 8, serialConsistency: 'SERIAL', contactPoints: [] });
    const owner = new CassandraSnapshotStore<{ n: number }>({
      session,
      keyspace,
      table: TABLE,
      applicationId: 'app',
      groupId: 'group',
      codec: jsonCodec<{ n: number }>(),
      consistency: { read: 'LOCAL_QUORUM', write: 'LOCAL_QUORUM' },
      ttlSeconds: 0,
      fencing: 'lwt',
      fenceRowTtlSeconds: 86_400,
      generation: 9,
    });
    const err = await refusal(owner.writeBatch(P, [put('c', 50)]));
    expect(err.reasons).toEqual(['contended']);
    expect(owner.stats.writeStatements).toBe(MAX_ROUNDS);
    // Once the stale owner stops, the newer owner's write lands.
    expect(await a.snapshots!.withGeneration(9).writeBatch(P, [put('c', 50)])).toEqual(['applied']);
    expect(await storedRow('c')).toMatchObject({ offset: 50, generation: 9 });
  });
});

describe('through the engine: the partition fails and recovers from what landed instead of waiting for an owner that does not exist', () => {
  test("its own late write at a newer offset: PersistFailedError (not SnapshotWriteConflictError), and the retry's recovery loads the late write's state", async () => {
    const Q = { topic: 'orders', partition: 3 };
    const tables = { snapshots: 'engine_snapshots', keys: 'engine_keys' };
    const records = roundRobin(4, 0, 60);
    const group = new InMemoryOffsetCommitter();
    const [ownerProcess, lateProcess, retryProcess] = [
      await startBackend<Tally, number>(keyspace, { tables }),
      await startBackend<Tally, number>(keyspace, { tables }),
      await startBackend<Tally, number>(keyspace, { tables }),
    ];
    try {
      const owner = tallyFlow(await ownerProcess.forPartition({ ...Q, generation: 1, committer: group }), '0', { partition: 3 });
      await owner.flow.recover();
      await step(owner.flow, owner.clock, records.slice(0, 20));
      expect(group.committed(Q)).toBe(20);
      // The owner's own write of key k0 as of offset 56 lands late (same generation, e.g. a
      // statement that timed out and completed after the partition had moved on).
      const k0 = expectedTallies(records.slice(0, 57)).get('k0')!;
      const late = lateProcess.snapshots!.withGeneration(1);
      expect(await late.writeBatch(Q, [{ kind: 'put', key: 'k0', snapshot: { state: k0, offset: 56 } }])).toEqual(['applied']);

      const err = await step(owner.flow, owner.clock, records.slice(20, 40)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(PersistFailedError);
      expect(err).not.toBeInstanceOf(SnapshotWriteConflictError);
      expect((err as PersistFailedError).cause).toBeInstanceOf(CassandraWriteRefusedError);
      expect(group.committed(Q)).toBe(20);

      // The retry on the same owner (same generation): recovery reads what landed, k0 skips its
      // records up to 56, and the state ends exact.
      const retry = tallyFlow(await retryProcess.forPartition({ ...Q, generation: 1, committer: group }), String(group.committed(Q)), { partition: 3 });
      expect(await retry.flow.recover()).toBe(4);
      await step(retry.flow, retry.clock, records.slice(20, 60));
      expect(retry.flow.failed).toBeUndefined();
      expect(group.committed(Q)).toBe(60);
      const states = await recoverStates(await retryProcess.forPartition({ ...Q, generation: 1, committer: new InMemoryOffsetCommitter() }));
      expect(new Map([...states].map(([k, v]) => [k, v.state]))).toEqual(expectedTallies(records));
    } finally {
      await closeAll(
        () => ownerProcess.close(),
        () => lateProcess.close(),
        () => retryProcess.close(),
      );
    }
  });
});
