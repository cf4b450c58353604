// Cooperative rebalancing on the real broker (the kafkajs patch's incremental revoke point and the
// cooperative state assignor): when a second member joins, the first gives up only the partitions
// that move — after the sync, under the new generation, which gives them to no one — keeps the
// others (same ownership generation, its fetch position carried over), and the second member gets
// the moved ones only in the next round, after the first member's revoke point ended. A commit
// under the generation the group left is still refused.
import { PartitionAssigners } from 'kafkajs';
import { stateAssigner } from '../../../kafka/state-assignor';
import { ownershipGeneration } from '../../../kafka/group-membership';
import { type RevokedPartitions, withRevokePoint } from '../../../kafka/revoke-point';
import { TransactionalWriter } from '../../../kafka/transactional-writer';
import { SnapshotWriteFencedError } from '../../../kafka/errors';
import type { GroupGeneration } from '../../../kafka';
import { closeAll, fillInput, kafkaScope, type RunningMember, sleep, startMember, unique, waitFor } from '../../support/servers';

const noHints = () => ({ owned: {}, fresh: {} });
const cooperative = () => stateAssigner(noHints, 0, true);
/** What a cooperative worker lists: its protocol first, the eager ones after it (rolling upgrades). */
const cooperativeFirst = () => [stateAssigner(noHints, 0, true), stateAssigner(noHints, 0), PartitionAssigners.roundRobin];

describe('cooperative rebalancing on the real broker', () => {
  const kafka = kafkaScope('cooperative');
  let input: string;
  let snapshots: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 4);
    snapshots = await kafka.topic('snapshots', 4);
  });

  it('a joining member takes only what moves, after its owner gave it up; the owner keeps the rest without a revoke', async () => {
    const groupId = unique('group');
    const events: Array<{ at: number; what: string }> = [];
    const mark = (what: string) => events.push({ at: Date.now(), what });
    const revoked: RevokedPartitions[] = [];
    const flushErrors: unknown[] = [];
    const firstJoins: GroupGeneration[] = [];
    const secondJoins: GroupGeneration[] = [];
    const folded = new Map<number, number[]>();
    const writers = [0, 1, 2, 3].map((partition) => new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: unique('app'), partition, groupId }));
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    try {
      await fillInput(kafka.client, input, [0, 1, 2, 3], 5);
      const config = withRevokePoint({ groupId, partitionAssigners: [cooperative()] }, async (r) => {
        mark(`revoke-start:${r.generationId}`);
        revoked.push(r);
        for (const { partitions } of r.assignment) {
          for (const partition of partitions) {
            // The flush of a partition being given up, under the generation just joined.
            await writers[partition]!.commit({
              messages: [{ topic: snapshots, partition, key: 'k', value: `flushed-${r.generationId}` }],
              offsets: [{ topic: input, partition, offset: '5' }],
              generation: r,
            }).catch((err: unknown) => flushErrors.push(err));
          }
        }
        await sleep(500); // a slow flush: the moved partitions must not reach the other member before it ends
        mark('revoke-end');
      });
      first = await startMember(kafka.client, config, input, {
        eachBatch: async ({ batch, resolveOffset }) => {
          const list = folded.get(batch.partition) ?? [];
          for (const m of batch.messages) {
            list.push(Number(m.offset));
            resolveOffset(m.offset);
          }
          folded.set(batch.partition, list);
        },
        onJoin: (g) => {
          firstJoins.push(g);
          mark(`first-joined:${g.generationId}`);
        },
      });
      const gen1 = await first.membership.waitForJoin(30_000);
      expect(gen1.cooperative).toBe(true);
      expect(gen1.assignment[input]?.slice().sort()).toEqual([0, 1, 2, 3]);
      await waitFor('the first member to fetch every partition', () => [0, 1, 2, 3].every((p) => (folded.get(p) ?? []).length === 5));

      second = await startMember(kafka.client, { groupId, partitionAssigners: [cooperative()] }, input, {
        onJoin: (g) => {
          secondJoins.push(g);
          mark(`second-joined:${g.generationId}:${(g.assignment[input] ?? []).length}`);
        },
      });
      await waitFor('the second member to get two partitions', () => secondJoins.some((g) => (g.assignment[input] ?? []).length === 2), 60_000);
      const handed = secondJoins.find((g) => (g.assignment[input] ?? []).length === 2)!;

      // One incremental revoke of exactly what moved, flushed under the generation it was given up in.
      expect(revoked).toHaveLength(1);
      expect(revoked[0]).toMatchObject({ reason: 'rebalance', incremental: true });
      const moved = revoked[0]!.assignment.flatMap((a) => a.partitions).sort();
      expect(moved).toEqual([...(handed.assignment[input] ?? [])].sort());
      expect(flushErrors).toEqual([]);

      // The first member's last join: the kept partitions, held since its first join.
      await waitFor('the first member to join the round that hands the partitions on', () => firstJoins.some((g) => g.generationId >= handed.generationId));
      const latest = first.membership.current()!;
      const kept = [...(latest.assignment[input] ?? [])].sort();
      expect(kept).toHaveLength(2);
      expect(kept.filter((p) => moved.includes(p))).toEqual([]);
      for (const p of kept) expect(ownershipGeneration(latest, input, p)).toBe(gen1.generationId);
      for (const p of moved) expect(ownershipGeneration(latest, input, p)).toBeUndefined();

      // The second member got them only after the first member's revoke point ended.
      const revokeEnd = events.find((e) => e.what === 'revoke-end')!.at;
      const handedAt = events.find((e) => e.what === `second-joined:${handed.generationId}:2`)!.at;
      expect(handedAt).toBeGreaterThanOrEqual(revokeEnd);

      // Kept partitions go on from where they were: nothing fetched twice.
      await fillInput(kafka.client, input, kept, 3);
      await waitFor('the kept partitions to fetch the new records', () => kept.every((p) => (folded.get(p) ?? []).length === 8));
      for (const p of kept) expect(folded.get(p)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);

      // A kept partition commits under the member's current generation; the one the group left is refused.
      const k = kept[0]!;
      await writers[k]!.commit({ messages: [{ topic: snapshots, partition: k, key: 'k', value: 'now' }], offsets: [{ topic: input, partition: k, offset: '8' }], generation: latest });
      const stale = writers[k]!.commit({ messages: [], offsets: [{ topic: input, partition: k, offset: '8' }], generation: gen1 });
      await expect(stale).rejects.toBeInstanceOf(SnapshotWriteFencedError);
      await expect(stale).rejects.toMatchObject({ reason: 'generation' });
    } finally {
      await closeAll(
        () => first?.consumer.disconnect() ?? Promise.resolve(),
        () => second?.consumer.disconnect() ?? Promise.resolve(),
        ...writers.map((w) => () => w.close()),
      );
    }
  }, 120_000);

  it('a member told of a next round hears of it at once: the round that hands the partitions on ends with the revoke, not at a heartbeat', async () => {
    // The joining member heartbeats 20 s apart: waiting for its heartbeat to hear of the next round
    // would hold that round up for seconds (its phase is random); told of it in its assignment, it
    // heartbeats every 100 ms until then. (The first member heartbeats often: it must hear of the
    // join itself soon, and it begins the next round by rejoining after its revoke.)
    const slowHeartbeats = { sessionTimeout: 60_000, rebalanceTimeout: 60_000, heartbeatInterval: 20_000 };
    const groupId = unique('group');
    let revokeEnd = 0;
    let handedAt = 0;
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    try {
      await fillInput(kafka.client, input, [0, 1, 2, 3], 1);
      const config = withRevokePoint({ groupId, partitionAssigners: [cooperative()], sessionTimeout: 60_000, rebalanceTimeout: 60_000 }, async () => {
        await sleep(300); // the flush
        revokeEnd = Date.now();
      });
      first = await startMember(kafka.client, config, input);
      await first.membership.waitForJoin(30_000);
      second = await startMember(kafka.client, { groupId, partitionAssigners: [cooperative()], ...slowHeartbeats }, input, {
        onJoin: (g) => {
          if ((g.assignment[input] ?? []).length === 2 && handedAt === 0) handedAt = Date.now();
        },
      });
      await waitFor('the second member to get two partitions', () => handedAt > 0, 60_000);
      expect(revokeEnd).toBeGreaterThan(0);
      // Without the announcement the second member would hear of the next round at its next heartbeat (up to 20 s later).
      expect(handedAt - revokeEnd).toBeLessThan(3_000);
    } finally {
      await closeAll(
        () => first?.consumer.disconnect() ?? Promise.resolve(),
        () => second?.consumer.disconnect() ?? Promise.resolve(),
      );
    }
  }, 120_000);

  it('a rolling upgrade: with an eager-only member the group runs eager; without it, cooperative; one joining again makes the others lose (not flush) what they owned', async () => {
    const groupId = unique('group');
    const revokes: Record<string, RevokedPartitions[]> = { b: [], c: [] };
    const member = (name: 'b' | 'c') =>
      withRevokePoint({ groupId, partitionAssigners: cooperativeFirst() }, async (r) => {
        revokes[name]!.push(r);
      });
    let old: RunningMember | undefined;
    let b: RunningMember | undefined;
    let c: RunningMember | undefined;
    let again: RunningMember | undefined;
    try {
      // An earlier version's member (kafkajs's round robin only) and a new one: the group runs eager.
      old = await startMember(kafka.client, { groupId }, input);
      const oldJoin = await old.membership.waitForJoin(30_000);
      b = await startMember(kafka.client, member('b'), input);
      const mixed = await b.membership.waitForJoin(30_000, oldJoin.generationId);
      expect(mixed.cooperative).toBe(false);

      // The old member leaves: b gives everything up first (the group was eager), then the group
      // runs the cooperative protocol.
      const leftAt = mixed.generationId;
      await old.consumer.disconnect();
      old = undefined;
      const alone = await b.membership.waitForJoin(30_000, leftAt);
      expect(alone.cooperative).toBe(true);
      expect(revokes.b!.at(-1)).toMatchObject({ generationId: leftAt, reason: 'rebalance' });
      expect(revokes.b!.at(-1)!.incremental).toBeFalsy();

      // A second new member: b revokes incrementally only what moves.
      c = await startMember(kafka.client, member('c'), input);
      await waitFor('c to get two partitions', () => (c!.membership.current()?.assignment[input] ?? []).length === 2, 60_000);
      const incremental = revokes.b!.filter((r) => r.incremental);
      expect(incremental).toHaveLength(1);
      expect(incremental[0]!.assignment.flatMap((a) => a.partitions)).toHaveLength(2);

      // An eager-only member joins again (a rollback): the group turns eager; b and c had kept their
      // partitions through the join, so what they owned is lost (told, not flushed) before the join is announced.
      const coopGen = c.membership.current()!.generationId;
      again = await startMember(kafka.client, { groupId }, input);
      await waitFor('b and c to rejoin the eager group', () => [b, c].every((m) => (m!.membership.current()?.generationId ?? 0) > coopGen && m!.membership.current()?.cooperative === false), 60_000);
      for (const name of ['b', 'c'] as const) {
        const lost = revokes[name]!.filter((r) => r.lost);
        expect(lost.length).toBeGreaterThanOrEqual(1);
        expect(lost[0]!.assignment.flatMap((a) => a.partitions)).toHaveLength(2);
      }
    } finally {
      await closeAll(
        () => old?.consumer.disconnect() ?? Promise.resolve(),
        () => again?.consumer.disconnect() ?? Promise.resolve(),
        () => b?.consumer.disconnect() ?? Promise.resolve(),
        () => c?.consumer.disconnect() ?? Promise.resolve(),
      );
    }
  }, 180_000);

  it('the partitions a member keeps are fetched on through the rebalance (its revoke point and both rounds)', async () => {
    const groupId = unique('group');
    const batchesAt = new Map<number, number[]>();
    let revoking = false;
    const config = withRevokePoint({ groupId, partitionAssigners: [cooperative()] }, async () => {
      revoking = true;
      await sleep(1_500); // a slow flush of what moves: what stays must not wait for it
      revoking = false;
    });
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    let producing = true;
    const load = (async () => {
      while (producing) {
        await fillInput(kafka.client, input, [0, 1, 2, 3], 1);
        await sleep(50);
      }
    })();
    try {
      first = await startMember(kafka.client, config, input, {
        eachBatch: async ({ batch }) => {
          const list = batchesAt.get(batch.partition) ?? [];
          list.push(Date.now());
          batchesAt.set(batch.partition, list);
        },
      });
      await first.membership.waitForJoin(30_000);
      await waitFor('batches of every partition', () => [0, 1, 2, 3].every((p) => (batchesAt.get(p) ?? []).length > 3));
      const from = Date.now();
      second = await startMember(kafka.client, { groupId, partitionAssigners: [cooperative()] }, input);
      await waitFor('the second member to get two partitions', () => (second!.membership.current()?.assignment[input] ?? []).length === 2, 60_000);
      await sleep(500);
      const to = Date.now();
      expect(revoking).toBe(false);
      const kept = first.membership.current()!.assignment[input] ?? [];
      expect(kept).toHaveLength(2);
      for (const p of kept) {
        const times = [from, ...(batchesAt.get(p) ?? []).filter((t) => t > from && t < to), to];
        const longest = Math.max(...times.slice(1).map((t, i) => t - times[i]!));
        // Fetched every ~50-200 ms; a stop for the rebalance would be ≥ the 1.5 s revoke point.
        expect(longest).toBeLessThan(1_000);
      }
    } finally {
      producing = false;
      await load.catch(() => undefined);
      await closeAll(
        () => first?.consumer.disconnect() ?? Promise.resolve(),
        () => second?.consumer.disconnect() ?? Promise.resolve(),
      );
    }
  }, 120_000);
});
