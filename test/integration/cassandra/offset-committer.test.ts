// The Cassandra backend's input-offset commit on the real broker: a real consumer group member
// commits through ConsumerOffsetCommitter (kafkajs's OffsetCommit, with its generation and
// member id); once a second real member has joined and the group moved on without the first
// (stuck in a batch, so evicted), the first's commit is rejected with SnapshotWriteFencedError and the
// committed offset stays the new owner's.
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { ConsumerOffsetCommitter } from '../../../persistence/cassandra';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { closeAll, fillInput, kafkaScope, type RunningMember, startMember, unique, waitFor } from '../../support/servers';

describe('ConsumerOffsetCommitter on the real broker', () => {
  const kafka = kafkaScope('cassandra-committer', { per: 'file' });
  let input: string;

  beforeAll(async () => {
    input = await kafka.topic('cassandra-input', 1);
    await fillInput(kafka.client, input, [0], 100);
  });

  it("commits with the member's generation; a stale member's commit is rejected once a second member owns the group", async () => {
    const groupId = unique('cassandra-group');
    const offsets = new CommittedOffsets(kafka.client);
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inBatch = false;
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    try {
      // The first member gets a batch and stays inside it (a GC pause, a slow fold): no heartbeats,
      // no rejoin. Broker minimum session timeout: 6 s.
      first = await startMember(kafka.client, { groupId, sessionTimeout: 6000, rebalanceTimeout: 6000 }, input, {
        eachBatch: async () => {
          inBatch = true;
          await stuck;
        },
      });
      const gen1 = await first.membership.waitForJoin(30_000);
      const stale = new ConsumerOffsetCommitter({ consumer: first.consumer, membership: first.membership });
      const P = { topic: input, partition: 0 };
      await waitFor('the first member to be inside its batch', () => inBatch, 30_000);

      await stale.commit(P, 10);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('10');

      // A real second member joins; the group completes the rebalance without the stuck first member.
      second = await startMember(kafka.client, { groupId }, input);
      const gen2 = await second.membership.waitForJoin(40_000, gen1.generationId);
      expect(gen2.assignment[input]).toEqual([0]);
      const owner = new ConsumerOffsetCommitter({ consumer: second.consumer, membership: second.membership });
      await owner.commit(P, 30);

      // The first member still believes it owns the partition (no new join): the broker says no.
      expect(first.membership.current()?.generationId).toBe(gen1.generationId);
      const rejected = stale.commit(P, 20);
      await expect(rejected).rejects.toBeInstanceOf(SnapshotWriteFencedError);
      await expect(rejected).rejects.toMatchObject({ code: 'FENCED', topic: input, partition: 0 });
      const error = (await rejected.catch((e: unknown) => e)) as SnapshotWriteFencedError;
      expect(['generation', 'member']).toContain(error.reason);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('30');
    } finally {
      release();
      await closeAll(
        () => offsets.close(),
        async () => second?.consumer.disconnect(),
        async () => first?.consumer.disconnect(),
      );
    }
  });
});
