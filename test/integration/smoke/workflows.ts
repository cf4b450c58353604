import { proxyActivities } from '@temporalio/workflow';

const { shout } = proxyActivities<{ shout(s: string): Promise<string> }>({ startToCloseTimeout: '10 s' });

/** Smoke workflow: proves a real Temporal server schedules a workflow task and an activity. */
export async function smokeWorkflow(name: string): Promise<string> {
  return `hello, ${await shout(name)}`;
}
