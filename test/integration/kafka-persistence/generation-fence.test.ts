// The generation fence isolated (no producer-epoch fence involved): a member that is still alive
// but commits under the generation it had before a rebalance — a stale owner that has not noticed
// it yet — meets ILLEGAL_GENERATION from the group coordinator (KIP-447, TxnOffsetCommit v3).
// (4) an offset commit (a transaction with no writes) from a stale generation is rejected;
// (5) a stale writer's very FIRST snapshot flush, which carries no offset of its own, is rejected
//     too, because every transaction commits the offset seeded at assignment.
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import type { GroupGeneration } from '../../../kafka/group-membership';
import { TransactionalWriter } from '../../../kafka/transactional-writer';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { fillInput, kafkaScope, unique, waitFor } from '../../support/servers';
import { snapshotsOf } from './harness';

describe('the consumer-generation fence on the real broker', () => {
  const kafka = kafkaScope('genfence');
  let input: string;
  let snapshotTopic: string;
  let groupId: string;
  let prefix: string;
  let backend: KafkaSnapshotBackend<number>;
  let offsets: CommittedOffsets;

  beforeEach(async () => {
    input = await kafka.topic('input', 1);
    snapshotTopic = kafka.topicName('snapshots');
    groupId = unique('group');
    prefix = unique('app');
    await fillInput(kafka.client, input, [0], 10);
    backend = new KafkaSnapshotBackend<number>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic, transactionalIdPrefix: prefix, transactional: true });
    offsets = new CommittedOffsets(kafka.client);
    kafka.defer(() => offsets.close());
    kafka.defer(() => backend.close());
  });

  /** A joins; returns A's generation as captured then, and a function that moves the group on (B joins, A rejoins). */
  async function memberA(): Promise<{ captured: GroupGeneration; rebalance: () => Promise<void> }> {
    const a = await kafka.member({ groupId }, input);
    const captured = await a.membership.waitForJoin(30_000);
    return {
      captured,
      rebalance: async () => {
        const b = await kafka.member({ groupId }, input);
        await b.membership.waitForJoin(30_000, captured.generationId);
        await waitFor('A to rejoin the next generation', () => (a.membership.current()?.generationId ?? 0) > captured.generationId);
      },
    };
  }

  it('(4) rejects a transactional offset commit from a stale consumer generation', async () => {
    const { captured, rebalance } = await memberA();
    const stale = await backend.forPartition({ topic: input, partition: 0, generation: { generationId: captured.generationId, memberId: captured.memberId } });
    await stale.write({ writes: [], commitOffset: 4 }); // current: lands
    expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('4');

    await rebalance(); // A is alive and in the group, but this persistence still commits under the old generation
    const error = await stale.write({ writes: [], commitOffset: 8 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SnapshotWriteFencedError);
    expect(error).toMatchObject({ code: 'FENCED', reason: 'generation', topic: input, partition: 0 });
    expect((error as SnapshotWriteFencedError).detail).toMatch(/ILLEGAL_GENERATION/);
    expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('4');
    expect(backend.fences).toBe(1);
  });

  it('(5) gates a stale writer\'s very first snapshot flush with the offset seeded at assignment', async () => {
    const { captured, rebalance } = await memberA();
    const current = await backend.forPartition({ topic: input, partition: 0, generation: { generationId: captured.generationId, memberId: captured.memberId } });
    await current.write({ writes: [], commitOffset: 3 });
    // A new persistence, seeded at assignment with the committed offset 3, under the captured generation.
    const stale = await backend.forPartition({ topic: input, partition: 0, generation: { generationId: captured.generationId, memberId: captured.memberId } });
    expect(stale.committedOffset).toBe(3);
    await rebalance();

    // Its first write carries no offset of its own (nothing new to commit), only the seed.
    // The coordinator answers ILLEGAL_GENERATION, or UNKNOWN_MEMBER_ID when A missed its session during
    // the rebalance (a loaded machine) and rejoined under a new member id: either way the seed gates it.
    const error = await stale.write({ writes: [{ key: 'k', snapshot: { state: 666, offset: 5 } }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SnapshotWriteFencedError);
    expect(['generation', 'member']).toContain((error as SnapshotWriteFencedError).reason);
    expect((await snapshotsOf(backend)).size).toBe(0); // nothing landed

    // The control: the same stale write in a transaction WITHOUT an offset commit is not gated and lands.
    const ungated = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: unique('ungated'), partition: 0, groupId });
    try {
      await ungated.commit({
        messages: [{ topic: snapshotTopic, partition: 0, key: 'k', value: backend.format.encode({ state: 666, offset: 5 }) }],
        offsets: [],
        generation: captured,
      });
    } finally {
      await ungated.close();
    }
    expect((await snapshotsOf(backend)).get('k')).toEqual({ offset: '5', state: 666 });
    expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('3');
  });
});

