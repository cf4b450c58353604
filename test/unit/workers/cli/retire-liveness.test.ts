// `retire` refuses while a worker of the flow is alive. Which of the flow's past owners count as
// alive, from their assignments, their revokes and their task queues' last polls (pure: the
// Temporal calls that gather these are exercised in test/integration/console/temporal-ui.test.ts).
import { LIVE_POLL_WINDOW_MS, workerLiveness } from '../../../../workers/cli/retire';

const queue = (pid: string) => `kafka-flow-temporal/orders/vm/${pid}`;
const owner = (pid: string, memberId: string, generation = 1) => ({ taskQueue: queue(pid), memberId, generation });
const now = 1_800_000_000_000;

describe('workerLiveness', () => {
  test('a worker that polled within the window is alive; one whose last poll is older is not', () => {
    const polls = new Map([
      [queue('1-a'), now - 3_000],
      [queue('2-b'), now - LIVE_POLL_WINDOW_MS - 1],
    ]);
    expect(workerLiveness([owner('1-a', 'm1'), owner('2-b', 'm2')], new Set(), polls, now)).toEqual(['worker vm/1-a polled 3 s ago']);
  });

  test('a worker that stopped gracefully (a member of its revoked with reason shutdown) is not alive, even while its pollers are still listed', () => {
    const polls = new Map([
      [queue('1-a'), now - 1_000],
      [queue('2-b'), now - 1_000],
    ]);
    // 1-a joined twice (members m1, m3) and stopped as m3; 2-b never stopped: killed, or still running.
    const owners = [owner('1-a', 'm1', 1), owner('2-b', 'm2', 1), owner('1-a', 'm3', 2)];
    expect(workerLiveness(owners, new Set(['m3']), polls, now)).toEqual(['worker vm/2-b polled 1 s ago']);
  });

  test('a worker whose queue has no pollers at all is not alive', () => {
    expect(workerLiveness([owner('1-a', 'm1')], new Set(), new Map(), now)).toEqual([]);
  });
});
