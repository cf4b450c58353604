// SlotOwner.nextGeneration (workers/runtime/partition-owner.ts) on an in-memory fake consumer (pure
// logic): how long a commit the group refused waits for the group's next join. A commit can be
// waited on inside the consumer's batch callback, where no join can come; waiting the rebalance
// timeout there stalled two workers for 60 s in a chaos run, so the wait is at most the session
// timeout.
import type { FlowConsumer } from '../../../../workers/runtime/flow-consumer';
import { SlotOwner } from '../../../../workers/runtime/partition-owner';
import type { Slot } from '../../../../workers/runtime/partition-slots';

function fakeConsumer(join: (after: number, timeoutMs: number) => Promise<undefined>) {
  const current = { groupId: 'g', generationId: 7, memberId: 'm', assignment: { orders: [3] }, cooperative: true };
  return {
    current: () => current,
    joinAfter: join,
    committedPosition: async () => undefined,
  } as unknown as FlowConsumer;
}
const slot = { topic: 'orders', partition: 3, generation: 7, memberId: 'm', state: 'running', recoverSeq: 1 } as unknown as Slot;

test.each([
  [{ rebalanceTimeoutMs: 60_000, sessionTimeoutMs: 10_000 }, 10_000],
  [{ rebalanceTimeoutMs: 5_000, sessionTimeoutMs: 10_000 }, 5_000],
])('a refused commit waits for the next join at most the session timeout (%o: %d ms), then is a fence', async (timeouts, expected) => {
  const waits: number[] = [];
  const owner = new SlotOwner(slot, { generation: 7, memberId: 'm' }, 'g', fakeConsumer(async (_after, timeoutMs) => {
    waits.push(timeoutMs);
    return undefined; // no join within the wait
  }), timeouts);
  expect(await owner.nextGeneration({ generationId: 7, memberId: 'm' })).toBeUndefined();
  expect(waits).toEqual([expected]);
});
