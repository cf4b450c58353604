// ConsumerOffsetCommitter without a broker: the local ownership check and the mapping of the
// group coordinator's refusals to SnapshotWriteFencedError (the real broker: test/integration/cassandra).
import { ConsumerOffsetCommitter, type MembershipView } from '../../../../persistence/cassandra';
import { SnapshotWriteFencedError } from '../../../../core/fence-errors';

const P = { topic: 'orders', partition: 1 };

function protocolError(type: string, code: number) {
  return Object.assign(new Error(`kafkajs: ${type}`), { name: 'KafkaJSProtocolError', type, code, retriable: false });
}

function member(assignment: Record<string, number[]>, generationId = 4): MembershipView {
  return { current: () => ({ generationId, memberId: 'm-1', assignment }) };
}

describe('ConsumerOffsetCommitter', () => {
  test('commits the next offset to consume through the member, as a string', async () => {
    const sent: unknown[] = [];
    const committer = new ConsumerOffsetCommitter({
      consumer: { commitOffsets: async (offsets) => void sent.push(...offsets) },
      membership: member({ orders: [0, 1] }),
    });
    await committer.commit(P, 42);
    expect(sent).toEqual([{ topic: 'orders', partition: 1, offset: '42' }]);
  });

  test('refuses locally, without asking the broker, when the member does not hold the partition', async () => {
    let asked = 0;
    const consumer = { commitOffsets: async () => void asked++ };
    const moved = new ConsumerOffsetCommitter({ consumer, membership: member({ orders: [0] }) });
    await expect(moved.commit(P, 1)).rejects.toBeInstanceOf(SnapshotWriteFencedError);
    await expect(moved.commit(P, 1)).rejects.toMatchObject({ code: 'FENCED', reason: 'not-assigned' });
    await expect(moved.commit(P, 1)).rejects.toThrow(/generation 4 no longer assigns the partition to member m-1/);
    const never = new ConsumerOffsetCommitter({ consumer, membership: { current: () => undefined } });
    await expect(never.commit(P, 1)).rejects.toThrow(/has not joined the group/);
    expect(asked).toBe(0);
  });

  test.each([
    ['ILLEGAL_GENERATION', 22, 'generation'],
    ['UNKNOWN_MEMBER_ID', 25, 'member'],
  ])('%s from the coordinator is SnapshotWriteFencedError with the cause kept', async (type, code, reason) => {
    const cause = protocolError(type, code);
    const committer = new ConsumerOffsetCommitter({
      consumer: {
        commitOffsets: async () => {
          throw cause;
        },
      },
      membership: member({ orders: [1] }),
    });
    const commit = committer.commit(P, 7);
    await expect(commit).rejects.toBeInstanceOf(SnapshotWriteFencedError);
    await expect(commit).rejects.toMatchObject({ code: 'FENCED', reason, topic: 'orders', partition: 1, cause });
    await expect(commit).rejects.toThrow(new RegExp(`generation 4 \\(${type}\\)`));
  });

  test('any other failure (a rebalance in progress, a network error) is passed on as it is', async () => {
    const cause = protocolError('REBALANCE_IN_PROGRESS', 27);
    const committer = new ConsumerOffsetCommitter({
      consumer: {
        commitOffsets: async () => {
          throw cause;
        },
      },
      membership: member({ orders: [1] }),
    });
    await expect(committer.commit(P, 7)).rejects.toBe(cause);
  });
});
