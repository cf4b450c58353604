import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { PartitionStatus } from '../../../workflows/partition-workflow';
import { type HashState, isPoison, step } from '../../fixtures/offset-hash-flow';
import { freePort, privateCassandra } from '../../support/private-cassandra';
import { eventually, FlowCluster } from './harness';

// Self-healing on the real servers, on a private Cassandra these tests freeze (SIGSTOP; the shared
// server is never touched): the store gone for a while must neither stop a partition for good nor
// cost the worker its group membership.
const dataDir = mkdtempSync(path.join(tmpdir(), 'kft-self-healing-'));
let cassandra: ReturnType<typeof privateCassandra>;
const saved = process.env.CASSANDRA_CONTACT_POINTS;
let paused = false;

beforeAll(async () => {
  cassandra = privateCassandra(dataDir, await freePort(), await freePort());
  await cassandra.up();
  process.env.CASSANDRA_CONTACT_POINTS = cassandra.contactPoint; // the harness (inspect) reads the private server too
}, 180_000);

afterEach(() => {
  if (paused) cassandra.resume();
  paused = false;
});

afterAll(async () => {
  if (saved === undefined) delete process.env.CASSANDRA_CONTACT_POINTS;
  else process.env.CASSANDRA_CONTACT_POINTS = saved;
  await cassandra?.down().catch(() => undefined);
  rmSync(dataDir, { recursive: true, force: true });
}, 120_000);

// A worker persisting to Cassandra loses its store for 20 s mid-run. Its persists fail, the
// partitions go to `retrying`, and once Cassandra answers again they recover on the same owner —
// no rebalance, no new assignment, nobody restarts anything — and the state is exactly a plain
// fold of the input.
test('Cassandra frozen for 20 s under load: the partitions retry on their owner and resume by themselves, state exact', async () => {
  const cluster = new FlowCluster(2, { backend: 'cassandra', persistEveryMs: 500, env: { CASSANDRA_CONTACT_POINTS: cassandra.contactPoint } });
  try {
    await cluster.start();
    await cluster.produce(1000);
    const w = cluster.startWorker('w');
    const before = await cluster.untilRunningOn(1, 'w runs both partitions', 120_000);
    await cluster.untilCaughtUp('caught up before the outage');

    const load = cluster.produce(1000);
    cassandra.pause();
    paused = true;
    const frozenAt = Date.now();
    let retrying: PartitionStatus | undefined;
    await eventually('a partition retrying', async () => {
      retrying = (await cluster.status()).find((s) => s.phase === 'retrying');
      return retrying;
    }, 60_000);
    const left = 20_000 - (Date.now() - frozenAt);
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    cassandra.resume();
    paused = false;
    await load;

    const after = await cluster.untilRunningOn(1, 'running again by themselves', 150_000);
    await cluster.untilCaughtUp('caught up after the outage', 90_000);
    // The same owner and generation throughout: healed in place, not by a rebalance.
    expect(after.map((s) => s.owner)).toEqual(before.map((s) => s.owner));
    expect(retrying!.retry?.lastError).toBeTruthy();
    // The offsets are committed in the owning process (its persist cadence, the idle flush); the
    // workflow clears a partition's retry when its next persist report comes, up to persistEvery later.
    const healed = await eventually(
      'every partition healthy again in its workflow (no retry)',
      async () => {
        const rows = await cluster.status();
        return rows.every((s) => s.retry === undefined) ? rows : undefined;
      },
      10_000,
    );
    expect(healed.reduce((n, s) => n + (s.counters.retries ?? 0), 0)).toBeGreaterThanOrEqual(1);

    expect(await cluster.stop(w)).toBe(0);
    const reference = await cluster.reference();
    expect([...reference.values()].reduce((n, s) => n + s.count, 0)).toBe(2000);
    expect(await cluster.persisted()).toEqual(reference);
  } finally {
    await cluster.close();
  }
}, 480_000);

// A fold waiting for an outputs persist (maxPendingOutputs reached) waits inside the consumer's
// batch callback, where kafkajs sends no heartbeat of its own. With Cassandra frozen for longer
// than the group's session timeout (10 s against 6 s), the member must stay in the group: the
// wait heartbeats. Without that the group drops the member, the persist's offset commit fails
// (UNKNOWN_MEMBER_ID), the partition stops and its recovery replays from the last commit — in a
// chaos run at production load no commit of a partition landed for 455 s, and every recovery
// replayed it from offset 0 (docs/experiments/2026-12-07-cassandra-batch-heartbeats.md).
const EVERY = 5; // every fifth record is poison: a dead letter, an output
const FREEZE_MS = 10_000;

test('a fold waiting for an outputs persist on a frozen Cassandra keeps its group membership: no rebalance, no failed commit, state exact', async () => {
  const cluster = new FlowCluster(2, {
    backend: 'cassandra',
    sessionTimeoutMs: 6000,
    persistEveryMs: 1000,
    env: { TEST_POISON_EVERY: String(EVERY), TEST_MAX_PENDING_OUTPUTS: '4', CASSANDRA_CONTACT_POINTS: cassandra.contactPoint },
  });
  try {
    await cluster.start();
    await cluster.produce(200);
    const a = cluster.startWorker('a');
    const before = await cluster.untilRunningOn(1, 'a runs both partitions', 180_000);
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
    await cluster.close();
  }
}, 300_000);
