/**
 * The servers a test run brings up (test/support/global-setup.ts) come up while the run goes on;
 * an integration file waits here for them before its own hooks and tests (integration-setup.ts).
 * The run's main process writes the outcome to the file named by KFT_TEST_INFRA_STATUS.
 */
import fs from 'node:fs';

export const INFRA_STATUS_ENV = 'KFT_TEST_INFRA_STATUS';

/** The outcome of the run's start of its servers: ready, or the error that says how to start them. */
export type InfraStatus = { readonly ready: true } | { readonly ready: false; readonly error: string };

function read(file: string): InfraStatus | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as InfraStatus;
  } catch {
    return undefined; // not written yet
  }
}

/** Resolves once the run's servers are up; throws the run's message when they could not be started. */
export async function serversReady(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const file = env[INFRA_STATUS_ENV];
  if (!file) return; // a run without the integration project's globalSetup: nothing to wait for
  for (;;) {
    const s = read(file);
    if (s?.ready === true) return;
    if (s?.ready === false) throw new Error(s.error);
    await new Promise((r) => setTimeout(r, 200));
  }
}
