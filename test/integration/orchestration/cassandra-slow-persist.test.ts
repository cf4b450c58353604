// A fold that waits for an outputs persist (maxPendingOutputs reached) waits inside the consumer's
// batch callback, where kafkajs sends no heartbeat of its own. With Cassandra slower than the
// group's session timeout (here: its connections stalled for 10 s, the session 6 s), the member
// must stay in the group: the wait heartbeats. Without that, the group drops the member, the
// persist's offset commit fails (UNKNOWN_MEMBER_ID), the partition stops and is recovered again —
// in a chaos run at production load, every commit of a partition failed this way for 455 s and
// each recovery replayed it from offset 0 (docs/experiments/2026-12-07-cassandra-batch-heartbeats.md).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type HashState, isPoison, step } from '../../fixtures/offset-hash-flow';
import { freePort, privateCassandra } from '../../support/private-cassandra';
import { eventually, FlowCluster } from './harness';

const EVERY = 5; // every fifth record is poison: a dead letter, an output
const FREEZE_MS = 10_000;

test('a fold waiting for an outputs persist on a frozen Cassandra keeps its group membership: no rebalance, no failed commit, state exact', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'kft-slow-persist-'));
  const cassandra = privateCassandra(dataDir, await freePort(), await freePort());
  const saved = process.env.CASSANDRA_CONTACT_POINTS;
  const cluster = new FlowCluster(2, {
    backend: 'cassandra',
    sessionTimeoutMs: 6000,
    persistEveryMs: 1000,
    env: { TEST_POISON_EVERY: String(EVERY), TEST_MAX_PENDING_OUTPUTS: '4', CASSANDRA_CONTACT_POINTS: cassandra.contactPoint },
  });
  let paused = false;
  try {
    await cassandra.up();
    process.env.CASSANDRA_CONTACT_POINTS = cassandra.contactPoint; // the harness reads the private server too
    await cluster.start();
    await cluster.produce(200);
    const a = cluster.startWorker('a');
    const before = await eventually('a runs both partitions', () => cluster.runningOn(1), 120_000);
    await cluster.untilCaughtUp('caught up before the freeze');

    cassandra.pause();
    paused = true;
    const frozenAt = Date.now();
    // 40 poison records in batches a second apart: the first batch of each partition fills its 4
    // pending outputs and starts an outputs persist; the next one waits for it to make room.
    for (let i = 0; i < 4; i++) {
      await cluster.produce(50);
      await new Promise((r) => setTimeout(r, 1_000));
    }
    await new Promise((r) => setTimeout(r, Math.max(0, frozenAt + FREEZE_MS - Date.now())));
    cassandra.resume();
    paused = false;
    await cluster.untilCaughtUp('caught up after the freeze', 90_000);

    // The frozen node's writes may fail (a server timeout once it thaws): the partition then retries
    // on its owner. What must not happen is the group dropping the member meanwhile.
    const lines = cluster.logLines<{ msg: string; err?: { type?: string; message?: string } }>(a);
    const dropped = lines.filter((l) => /coordinator is not aware of this member|OffsetCommitFailedError/.test(`${l.msg} ${l.err?.type ?? ''}`));
    expect(dropped.map((l) => `${l.msg}: ${l.err?.message ?? ''}`.slice(0, 300))).toEqual([]);
    // Still the generation each partition ran under before the freeze: the group never rebalanced.
    const generations = (rows: ReadonlyArray<{ partition: number; owner?: { generation: number } }>) =>
      [...rows].sort((x, y) => x.partition - y.partition).map((r) => [r.partition, r.owner?.generation]);
    expect(generations((await cluster.runningOn(1))!)).toEqual(generations(before));

    expect(await cluster.stop(a)).toBe(0);
    const reference = new Map<string, HashState>();
    await cluster.readTopic(cluster.names.topic, cluster.partitions, (r) => {
      if (isPoison((JSON.parse(String(r.value)) as { n: number }).n, EVERY)) return;
      reference.set(String(r.key), step(reference.get(String(r.key)), r.offset));
    });
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    if (paused) cassandra.resume();
    await cluster.close();
    if (saved === undefined) delete process.env.CASSANDRA_CONTACT_POINTS;
    else process.env.CASSANDRA_CONTACT_POINTS = saved;
    await cassandra.down().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 400_000);
