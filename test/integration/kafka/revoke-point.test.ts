// The awaited revoke point on the real broker: when a second member joins, the first member's
// in-flight eachBatch finishes, then its onPartitionsRevoked runs (and is awaited) with the old
// generation, and a flush committed there under the old generation succeeds, before the group
// completes the rebalance.
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { type RevokedPartitions, withRevokePoint } from '../../../kafka/revoke-point';
import { TransactionalWriter } from '../../../kafka/transactional-writer';
import { closeAll, fillInput, kafkaScope, type RunningMember, sleep, startMember, unique, waitFor } from '../../support/servers';

describe('revoke point on the real broker', () => {
  const kafka = kafkaScope('revoke');
  let input: string;
  let snapshots: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 2);
    snapshots = await kafka.topic('snapshots', 2);
  });

  it('runs flushOnRevoke under the old generation after eachBatch and before the rejoin completes', async () => {
    const groupId = unique('group');
    const events: string[] = [];
    const revoked: RevokedPartitions[] = [];
    const flushErrors: unknown[] = [];
    const writer = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: unique('app'), partition: 0, groupId });
    const offsets = new CommittedOffsets(kafka.client);
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    let batchesInFlight = 0;
    try {
      const config = withRevokePoint({ groupId }, async (r) => {
        events.push(`revoke-start:${r.generationId}:${batchesInFlight}`);
        revoked.push(r);
        try {
          // The flush: snapshot + offset commit in one transaction, under the revoked generation.
          await writer.commit({
            messages: [{ topic: snapshots, partition: 0, key: 'k', value: `flushed-gen-${r.generationId}` }],
            offsets: [{ topic: input, partition: 0, offset: '7' }],
            generation: r,
          });
        } catch (err) {
          flushErrors.push(err);
        }
        await sleep(500); // a slow flush: the rejoin must wait for it
        events.push('revoke-end');
      });
      first = await startMember(kafka.client, config, input, {
        eachBatch: async () => {
          batchesInFlight += 1;
          events.push('batch-start');
          await sleep(1500); // in flight when the second member joins
          events.push('batch-end');
          batchesInFlight -= 1;
        },
        onJoin: (g) => events.push(`first-joined:${g.generationId}`),
      });
      const gen1 = await first.membership.waitForJoin(30_000);

      await fillInput(kafka.client, input, [0, 1], 10);
      await waitFor('a batch in flight', () => events.includes('batch-start'));
      second = await startMember(kafka.client, { groupId }, input, {
        onJoin: (g) => events.push(`second-joined:${g.generationId}`),
      });
      const gen2 = await second.membership.waitForJoin(30_000, gen1.generationId);

      expect(flushErrors).toEqual([]);
      // The revoke the second member's join caused: of the generation just before its own. (On a
      // loaded machine the group may have rebalanced once before, the first member alone — e.g. its
      // join seeing the new topic's metadata late — with a revoke of gen1 before any batch.)
      const before = gen2.generationId - 1;
      expect(before).toBeGreaterThanOrEqual(gen1.generationId);
      expect(revoked.find((r) => r.generationId === before)).toMatchObject({
        groupId,
        generationId: before,
        memberId: expect.any(String), // gen1's, unless a rebalance before made the member join anew
        reason: 'rebalance',
        assignment: [{ topic: input, partitions: [0, 1] }],
      });
      await waitFor('the first member to rejoin', () => events.includes(`first-joined:${gen2.generationId}`));
      const start = events.indexOf(`revoke-start:${before}:0`);
      const end = events.indexOf('revoke-end', start);
      // No eachBatch in flight when the revoke point starts, and one had finished before it.
      expect(start).toBeGreaterThan(events.indexOf('batch-end'));
      expect(events.indexOf('batch-end')).toBeGreaterThan(-1);
      // The rejoin (both members' joins of the new generation) waited for the slow flush.
      expect(end).toBeGreaterThan(start);
      expect(end).toBeLessThan(events.indexOf(`first-joined:${gen2.generationId}`));
      expect(end).toBeLessThan(events.indexOf(`second-joined:${gen2.generationId}`));
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('7');
    } finally {
      await closeAll(
        async () => second?.consumer.disconnect(),
        async () => first?.consumer.disconnect(),
        () => writer.close(),
        () => offsets.close(),
      );
    }
  });

  it('GROUP_JOIN carries the generation id; leaving runs the revoke point once with reason leave', async () => {
    const groupId = unique('group');
    const revoked: RevokedPartitions[] = [];
    let member: RunningMember | undefined;
    try {
      member = await startMember(
        kafka.client,
        withRevokePoint({ groupId }, async (r) => {
          revoked.push(r);
        }),
        input,
      );
      const running = member;
      // A join can land before the new topic's metadata does (empty assignment, then a rejoin).
      await waitFor('both partitions assigned', () => running.membership.current()?.assignment[input]?.length === 2);
      const generation = running.membership.current()!;
      expect(Number.isInteger(generation.generationId)).toBe(true);
      expect(generation.generationId).toBeGreaterThan(0);
      expect(generation.memberId).not.toBe('');
      await running.consumer.disconnect();
      // kafkajs may still rejoin once after this (late topic metadata): the leave then belongs to
      // the latest generation. Each generation is revoked exactly once, the last one by leaving.
      const latest = running.membership.current()!;
      expect(latest.generationId).toBeGreaterThanOrEqual(generation.generationId);
      expect(revoked.at(-1)).toEqual({
        groupId,
        generationId: latest.generationId,
        memberId: latest.memberId,
        reason: 'leave',
        assignment: [{ topic: input, partitions: [0, 1] }],
      });
      const generations = revoked.map((r) => r.generationId);
      expect(generations).toEqual([...new Set(generations)].sort((a, b) => a - b));
      expect(revoked.slice(0, -1).every((r) => r.reason === 'rebalance')).toBe(true);
    } finally {
      await closeAll(async () => member?.consumer.disconnect());
    }
  });

  // A graceful stop's flush commits at the `leave` revoke point, which kafkajs runs after its
  // runner stopped: upstream, consumer.commitOffsets then returned without sending anything, and
  // the engine took the commit for landed — its committed offset moved past delete markers it then
  // purged, and the next owner replayed those keys from the real (older) commit with no state
  // (chaos seed 2: a wrong `deleted` output). A commit there must land, or fail.
  it('a commit at the leave revoke point lands (or fails): never resolves without committing', async () => {
    const groupId = unique('group');
    const offsets = new CommittedOffsets(kafka.client);
    const outcomes: string[] = [];
    let member: RunningMember | undefined;
    try {
      await fillInput(kafka.client, input, [0], 10);
      member = await startMember(
        kafka.client,
        withRevokePoint({ groupId }, async (r) => {
          if (r.reason !== 'leave') return;
          try {
            await member!.consumer.commitOffsets([{ topic: input, partition: 0, offset: '7' }]);
            outcomes.push('resolved');
          } catch (err) {
            outcomes.push(`rejected: ${(err as Error).message}`);
          }
        }),
        input,
      );
      const running = member;
      await waitFor('both partitions assigned', () => running.membership.current()?.assignment[input]?.length === 2);
      await running.consumer.disconnect();
      expect(outcomes).toEqual(['resolved']);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('7');
    } finally {
      await closeAll(async () => member?.consumer.disconnect(), () => offsets.close());
    }
  });
});
