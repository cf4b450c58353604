/**
 * How long one activation of a partition workflow may run in the Temporal sandbox before the
 * worker times it out (the SDK's default is 5 s, and it no longer lists the option in its types:
 * its options pass through to the worker unchanged, test/unit/workers/bundle/workflow-sandbox.test.ts
 * checks that they still do).
 *
 * The sandbox's watchdog counts wall-clock time: a process paused (SIGSTOP, a stalled VM) in the
 * middle of an activation for longer than the bound times the activation out when it resumes, and
 * a timeout in the sandbox's vm context (microtaskMode 'afterEvaluate') can abort the whole process
 * with "async hook stack has become corrupted" (nodejs/node#38503, temporalio/sdk-typescript#939;
 * seen in CI on a worker woken from SIGSTOP). A partition workflow's activations take milliseconds
 * and run no user code, so a long bound costs nothing.
 */
export const workflowSandboxOptions: Record<string, unknown> = { isolateExecutionTimeout: '2 minutes' };
