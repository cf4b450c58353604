/**
 * The servers a test run started, so that it stops them when it ends: `npm test` brings up
 * whatever is not running (test/support/global-setup.ts) and the secured-servers test brings up
 * the secured ones; each such process is stopped by globalTeardown (test/support/global-teardown.ts)
 * unless KFT_TEST_KEEP_INFRA=1. What already ran before the run (started by `npm run infra:up`, by
 * another run, or outside `infra` altogether) is never stopped.
 */
import { serversOf } from '../../infra/infra';
import { livePid, stopProcess } from '../../infra/processes';
import type { Server } from '../../infra/servers/server';
import { type InfraSettings, OPTIONAL_SERVER_NAMES, SERVER_NAMES, type ServerName } from '../../infra/settings';

/** Each server process of `infra` (its pid file) alive at a moment. */
export type LivePids = Partial<Record<ServerName, number>>;

const everyServer = (settings: InfraSettings): Server[] => serversOf({ ...settings, servers: [...SERVER_NAMES, ...OPTIONAL_SERVER_NAMES] });

export function livePids(settings: InfraSettings): LivePids {
  const pids: LivePids = {};
  for (const server of everyServer(settings)) {
    const pid = livePid(server.process);
    if (pid !== undefined) pids[server.name] = pid;
  }
  return pids;
}

/** The servers whose process is alive now and was not at `before`: started during the run. */
export function startedSince(settings: InfraSettings, before: LivePids): Server[] {
  return everyServer(settings).filter((server) => {
    const pid = livePid(server.process);
    return pid !== undefined && pid !== before[server.name];
  });
}

export const keepInfra = (env: NodeJS.ProcessEnv = process.env): boolean => env.KFT_TEST_KEEP_INFRA === '1';

/** What globalSetup hands to globalTeardown (jest runs both in its main process: globals they set are shared). */
export interface InfraRun {
  dataDir: string;
  before: LivePids;
}

const KEY = '__kftInfraRun';

export function rememberRun(run: InfraRun): void {
  (globalThis as Record<string, unknown>)[KEY] = run;
}

export function rememberedRun(): InfraRun | undefined {
  return (globalThis as Record<string, unknown>)[KEY] as InfraRun | undefined;
}

/**
 * Stops the servers started since `before` (or, with KFT_TEST_KEEP_INFRA=1, says they stay and
 * how to stop them); returns the line it wrote, if any.
 */
export async function stopStartedServers(settings: InfraSettings, before: LivePids, write: (line: string) => void): Promise<string | undefined> {
  const ours = startedSince(settings, before);
  if (ours.length === 0) return undefined;
  const names = ours.map((s) => s.name).join(', ');
  if (keepInfra()) {
    const line = `[infra] leaving ${names} running (KFT_TEST_KEEP_INFRA=1): the next run reuses them; \`npm run infra:down\` stops them`;
    write(line);
    return line;
  }
  const outcomes = await Promise.all(ours.map(async (s) => `${s.name} ${await stopProcess(s.process)}`));
  const line = `[infra] stopped what this run started: ${outcomes.join(', ')} (KFT_TEST_KEEP_INFRA=1 keeps them running)`;
  write(line);
  return line;
}
