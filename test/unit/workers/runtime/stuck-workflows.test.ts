// Which partition workflow runs count as stuck on a Temporal SDK state-machine error (the owner's
// watchdog terminates those so that its next assignment starts a fresh run): the decision over the
// newest history events. Seen in chaos runs: a cancel the workflow requested raced the activity's
// timeout on the server, and every later workflow task failed the same way.
import { temporal } from '@temporalio/proto';
import { sdkFatalStuck } from '../../../../workers/runtime/stuck-workflows';

const T = temporal.api.enums.v1.EventType;
const fatal = 'Fatal error in workflow machines: ActivityMachine in state ScheduledActivityCancelCommandCreated says the transition is invalid during event EventInfo { event_id: 72, event_type: ActivityTaskTimedOut }';
const failed = (failure: string) => ({ type: T.EVENT_TYPE_WORKFLOW_TASK_FAILED, failure });
const other = (type: temporal.api.enums.v1.EventType) => ({ type });

test('two SDK-fatal failures in a row since the last completed task: stuck', () => {
  const newestFirst = [other(T.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), other(T.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), failed(fatal), other(T.EVENT_TYPE_WORKFLOW_TASK_STARTED), failed(fatal), other(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), failed(fatal)];
  expect(sdkFatalStuck(newestFirst)).toBe(fatal);
});

test('one failure is not yet stuck (a retry may pass); a completed task since resets the count', () => {
  expect(sdkFatalStuck([failed(fatal), other(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), failed(fatal)])).toBeUndefined();
  expect(sdkFatalStuck([other(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), failed(fatal), failed(fatal)])).toBeUndefined();
});

test('any other workflow task failure (nondeterminism, a workflow bug) is left to the operator', () => {
  const nondeterminism = '[TMPRL1100] Nondeterminism error: Activity type of scheduled event …';
  expect(sdkFatalStuck([failed(nondeterminism), failed(nondeterminism), failed(nondeterminism)])).toBeUndefined();
  expect(sdkFatalStuck([failed(fatal), failed('TypeError: x is undefined'), failed(fatal)])).toBeUndefined();
  expect(sdkFatalStuck([])).toBeUndefined();
});
