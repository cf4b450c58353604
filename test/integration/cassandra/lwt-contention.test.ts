// Fencing 'lwt' with the by-partition layout: a bucket is one Cassandra partition shared by many
// keys, and lightweight transactions on one partition contend for its Paxos state. A batch of
// many keys in few buckets sent them all at once: on a loaded machine whose node syncs its commit
// log before acknowledging, the contending rounds ran past Cassandra's contention timeout (a
// write timeout at SERIAL; with the CPU busy, 52 and 83 of 600 keys failed: docs/experiments/
// 2026-12-06-cassandra-lwt-contention.md). A process runs one LWT or serial read at a time per
// bucket: the test watches the statements the driver sends to the real node, and every write
// lands, twice.
import { type CassandraBackend, keyBucket } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { closeAll, dropKeyspace, keyspaceName } from '../../support/servers';
import { startBackend } from './support';

const keyspace = keyspaceName('kft_lwtcont');
const P = { topic: 'orders', partition: 0 };
type State = { n: number };
const BUCKETS = 2;

let backend: CassandraBackend<State, unknown> | undefined;

afterAll(async () => {
  await closeAll(async () => backend?.close(), () => dropKeyspace(keyspace));
});

/** Counts, per bucket, the conditional statements and serial reads in flight at once (the most seen). */
function watchPaxos(b: CassandraBackend<State, unknown>): { most: Map<number, number>; sent: () => number } {
  const client = b.session.client;
  const execute = client.execute.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const inFlight = new Map<number, number>();
  const most = new Map<number, number>();
  let sent = 0;
  (client as unknown as { execute: unknown }).execute = async (query: string, params: unknown[], options: { consistency?: number }) => {
    const paxos = / IF /.test(query) || options?.consistency === b.session.serialConsistency;
    if (!paxos || !query.includes('snapshots_by_partition')) return execute(query, params, options);
    const bucket = keyBucket(params.find((v): v is string => typeof v === 'string' && v.startsWith('key-'))!, BUCKETS);
    sent++;
    inFlight.set(bucket, (inFlight.get(bucket) ?? 0) + 1);
    most.set(bucket, Math.max(most.get(bucket) ?? 0, inFlight.get(bucket)!));
    try {
      return await execute(query, params, options);
    } finally {
      inFlight.set(bucket, inFlight.get(bucket)! - 1);
    }
  };
  return { most, sent: () => sent };
}

test(`a batch of 600 keys in ${BUCKETS} buckets lands whole, twice, one lightweight transaction at a time per bucket`, async () => {
  backend = await startBackend<State>(keyspace, { layout: 'by-partition', buckets: BUCKETS, fencing: 'lwt', maxConcurrentWrites: 64 });
  const paxos = watchPaxos(backend);
  const committer = new InMemoryOffsetCommitter();
  const p = await backend.forPartition({ ...P, generation: 1, committer });
  const keys = Array.from({ length: 600 }, (_, i) => `key-${i}`);
  for (const round of [0, 1]) {
    const started = Date.now();
    await p.write({ writes: keys.map((key, i) => ({ key, snapshot: { state: { n: round * 1000 + i }, offset: round * 1000 + i }, addKey: true })), commitOffset: round * 1000 + 600 });
    console.log(`lwt-contention: round ${round}: 600 keys in ${Date.now() - started} ms`);
  }
  expect(paxos.sent()).toBeGreaterThanOrEqual(1200);
  expect([...paxos.most.keys()].sort()).toEqual([0, 1]);
  expect([...paxos.most.values()]).toEqual([1, 1]);
  expect(committer.committed(P)).toBe(1600);
  const found = new Map<string, unknown>();
  for await (const k of (await backend.forPartition({ ...P, generation: 2, committer })).recover()) found.set(k.key, k.snapshot?.state);
  expect(found.size).toBe(600);
  expect([...found.entries()].every(([key, s]) => (s as State).n === 1000 + Number(key.slice(4)))).toBe(true);
}, 120_000);
