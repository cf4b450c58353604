import type { PartitionSignals } from '../../../../workers/runtime/partition-signals';
import { temporal } from '@temporalio/proto';
import { revokeTakenIn, ShutdownRevokeSignals, untilWorkflowTasksDone } from '../../../../workers/runtime/shutdown-revokes';
import { SETTLING_BEFORE_CARRY_OVER } from '../../../../workflows/partition/timer-summaries';

// A graceful stop waits, bounded, until the partition workflows it told of the shutdown have taken
// that revoke in (workers/worker.ts); these are the pieces: which workflows were told what, how a
// history shows the revoke taken in, and the wait.

const ref = (partition: number) => ({ flow: 'f', topic: 't', partition });
const revoke = (reason: 'shutdown' | 'revoke') => ({ generation: 3, memberId: 'm', reason });

test('records the workflows that accepted a shutdown revoke, not rebalance revokes or refused signals', async () => {
  const sent: string[] = [];
  const inner: PartitionSignals = {
    assigned: async () => undefined,
    revoked: async (r) => {
      if (r.partition === 9) throw new Error('Temporal unreachable');
      sent.push(`${r.partition}`);
    },
  };
  const signals = new ShutdownRevokeSignals(inner);
  await signals.revoked(ref(0), revoke('revoke'));
  await signals.revoked(ref(1), revoke('shutdown'));
  await signals.revoked(ref(2), revoke('shutdown'));
  await signals.revoked(ref(2), revoke('shutdown'));
  await expect(signals.revoked(ref(9), revoke('shutdown'))).rejects.toThrow('Temporal unreachable');
  expect(sent).toEqual(['0', '1', '2', '2']);
  expect(signals.workflows()).toEqual(['kafka-flow/f/t/1', 'kafka-flow/f/t/2']);
});

test('waits until no workflow has a pending workflow task, asking again only about those that had', async () => {
  const pendingFor = new Map([['a', 3], ['b', 0], ['c', 1]]); // polls that still see a task
  const asked: string[] = [];
  const probe = async (id: string) => {
    asked.push(id);
    const n = pendingFor.get(id)!;
    pendingFor.set(id, n - 1);
    return n > 0;
  };
  const started = Date.now();
  expect(await untilWorkflowTasksDone(['a', 'b', 'c'], probe, 5_000, 10)).toEqual([]);
  expect(Date.now() - started).toBeLessThan(2_000);
  expect(asked.filter((id) => id === 'a')).toHaveLength(4);
  expect(asked.filter((id) => id === 'b')).toHaveLength(1);
  expect(asked.filter((id) => id === 'c')).toHaveLength(2);
});

test('gives up after the timeout and names the workflows still pending, or unreadable', async () => {
  const probe = async (id: string) => {
    if (id === 'down') throw new Error('UNAVAILABLE');
    return id === 'busy';
  };
  const started = Date.now();
  expect(await untilWorkflowTasksDone(['busy', 'down', 'done'], probe, 300, 20)).toEqual(['busy', 'down']);
  expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  expect(Date.now() - started).toBeLessThan(1_500);
});

test('a server that does not answer does not hold the stop past the timeout', async () => {
  const started = Date.now();
  expect(await untilWorkflowTasksDone(['a'], () => new Promise<boolean>(() => undefined), 200)).toEqual(['a']);
  expect(Date.now() - started).toBeLessThan(1_000);
});

test('nothing signalled: returns at once', async () => {
  expect(await untilWorkflowTasksDone([], async () => true, 10_000)).toEqual([]);
});

describe('revokeTakenIn: the revoke this stop signalled, taken in by the workflow (newest event first)', () => {
  const E = temporal.api.enums.v1.EventType;
  const ours = { generation: 3, memberId: 'm' };
  const ev = (type: number) => ({ type });
  const signal = (name: string, payload: unknown) => ({ type: E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, signal: { name, payload } });

  test('a workflow task completed after the revoke: taken', () => {
    expect(revokeTakenIn([ev(E.EVENT_TYPE_TIMER_STARTED), ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), ev(E.EVENT_TYPE_WORKFLOW_TASK_STARTED), signal('revoked', ours)], ours)).toBe('taken');
  });

  test('the revoke newer than every completed task: pending — even with the next owner\'s assignment and its task after it', () => {
    const events = [
      ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
      signal('assigned', { generation: 4, memberId: 'n' }),
      ev(E.EVENT_TYPE_WORKFLOW_TASK_STARTED),
      ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
      signal('revoked', ours),
      ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
    ];
    expect(revokeTakenIn(events, ours)).toBe('pending');
  });

  test('another member\'s or generation\'s revoke is not ours; an unreadable payload counts as ours', () => {
    const before = [ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), signal('revoked', { generation: 2, memberId: 'm' }), signal('revoked', { generation: 3, memberId: 'x' })];
    expect(revokeTakenIn([...before, ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), signal('revoked', ours)], ours)).toBe('taken');
    expect(revokeTakenIn(before, ours)).toBe('unknown');
    expect(revokeTakenIn([signal('revoked', undefined), ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)], ours)).toBe('pending');
  });

  test('a run that started after it (the one before took it in and carried over), or a closed run: taken', () => {
    expect(revokeTakenIn([ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)], ours)).toBe('taken');
    expect(revokeTakenIn([ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED), signal('revoked', ours)], ours)).toBe('taken');
  });

  test('a long run settling before it carries over (its summarized timer running): pending until the timer is done', () => {
    const settle = { type: E.EVENT_TYPE_TIMER_STARTED, id: '41', timerSummary: SETTLING_BEFORE_CARRY_OVER };
    const taken = [ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), ev(E.EVENT_TYPE_WORKFLOW_TASK_STARTED), ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), signal('revoked', ours)];
    expect(revokeTakenIn([settle, ...taken], ours)).toBe('pending');
    // Cancelled (the next assignment came first) or fired (then the run continues as new, or is about to): taken.
    expect(revokeTakenIn([{ type: E.EVENT_TYPE_TIMER_CANCELED, timerStartedId: '41' }, settle, ...taken], ours)).toBe('taken');
    expect(revokeTakenIn([ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), { type: E.EVENT_TYPE_TIMER_FIRED, timerStartedId: '41' }, settle, ...taken], ours)).toBe('taken');
    // Another timer (waiting for an owner, `unowned`) is no carry-over.
    expect(revokeTakenIn([{ type: E.EVENT_TYPE_TIMER_STARTED, id: '42', timerSummary: 'kafka-flow: awaiting the next owner' }, ...taken], ours)).toBe('taken');
    expect(revokeTakenIn([{ type: E.EVENT_TYPE_TIMER_STARTED, id: '43' }, ...taken], ours)).toBe('taken');
  });

  test('neither within the events given: unknown', () => {
    expect(revokeTakenIn([ev(E.EVENT_TYPE_TIMER_FIRED), ev(E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)], ours)).toBe('unknown');
  });

  test('the stop remembers each workflow\'s revoke (generation, member) to look for', async () => {
    const signals = new ShutdownRevokeSignals({ assigned: async () => undefined, revoked: async () => undefined });
    await signals.revoked(ref(1), { generation: 7, memberId: 'm', reason: 'shutdown' });
    await signals.revoked(ref(2), { generation: 7, memberId: 'm', reason: 'revoke' });
    expect(signals.revokeOf('kafka-flow/f/t/1')).toEqual({ generation: 7, memberId: 'm' });
    expect(signals.revokeOf('kafka-flow/f/t/2')).toBeUndefined();
  });
});
