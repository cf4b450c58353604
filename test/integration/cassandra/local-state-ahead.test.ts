// Cassandra's local state when the process dies between the local store's write and Cassandra's
// (a real LMDB store in a temp directory, the shared Cassandra, two backends on their own clients
// as two processes would have): the next owner trusts the store (the group's last commit is its
// lineage's) and its replay skips the records the store covers — so the keys the store holds
// ahead of Cassandra must reach Cassandra before the commit passes those records. Found by the
// local-state integration test in CI: after a kill -9 under load, the group had committed to the
// end and Cassandra lacked the last 3,000 records of keys no later record touched.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CassandraBackend } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { cassandraScope, closeAll } from '../../support/servers';
import { expectedTallies, recoverStates, roundRobin, startBackend, step, type Tally, tallyFlow } from './support';

const cassandra = cassandraScope('kft_local_ahead');
const tp = { topic: 'orders', partition: 0 };

describe.each(['lwt', 'timestamp'] as const)("fencing '%s'", (fencing) => {
  let dir: string;
  const backends: CassandraBackend<Tally, number>[] = [];
  const start = async () => {
    const b = await startBackend<Tally, number>(cassandra.keyspace, { fencing, tables: { snapshots: `ahead_${fencing}` } });
    backends.push(b);
    return b;
  };

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-local-ahead-'));
  });
  afterEach(async () => {
    await closeAll(...backends.splice(0).map((b) => () => b.close()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('keys written to the store but not to Cassandra reach Cassandra on the next trusted restore, before anything is committed past them', async () => {
    const group = new InMemoryOffsetCommitter();
    const owner = (backend: CassandraBackend<Tally, number>, generation: number) =>
      backend.forPartition({ ...tp, generation, committer: group, localState: { dir, onDemand: false }, committed: async () => group.position(tp) });

    const first = await owner(await start(), 1);
    const a = tallyFlow(first, '0', tp);
    await a.flow.recover();
    await step(a.flow, a.clock, roundRobin(20, 0, 100));
    expect(group.committed(tp)).toBe(100);
    // The next batch goes to the store, then the process dies before Cassandra gets it.
    first.snapshots!.writeBatch = () => Promise.reject(new Error('killed between the local write and Cassandra'));
    await expect(step(a.flow, a.clock, roundRobin(20, 100, 150))).rejects.toThrow('persisting 20 key(s) of topic "orders" partition 0 failed');
    expect(group.committed(tp)).toBe(100);
    await first.close();

    // The next owner (another client, a newer generation) restores from the store: nothing read from Cassandra.
    const second = await owner(await start(), 2);
    const b = tallyFlow(second, '1', tp);
    await b.flow.recover();
    expect(second.lastRecovery).toMatchObject({ restore: 'delta', fromLocal: 20, fromTopic: 0 });
    await step(b.flow, b.clock, roundRobin(20, 100, 150)); // the replay from the commit: every record covered by the store
    expect(group.committed(tp)).toBe(150);
    await second.close();

    // What Cassandra holds (read without local state) is the fold of everything committed.
    const plain = await (await start()).forPartition({ ...tp, generation: 3, committer: new InMemoryOffsetCommitter() });
    const stored = await recoverStates(plain);
    const expected = expectedTallies(roundRobin(20, 0, 150));
    expect(new Map([...stored].map(([k, v]) => [k, v.state]))).toEqual(expected);
  });
});
