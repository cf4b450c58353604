import { readInfraSettings } from '../../infra/settings';
import { rememberedRun, stopStartedServers } from './run-servers';

/**
 * The end of a run that used the integration project: stops the servers this run started (by
 * globalSetup's `infra up`, or a test's, such as the secured servers'), unless
 * KFT_TEST_KEEP_INFRA=1. Servers that ran before it are left alone.
 */
export default async function globalTeardown(): Promise<void> {
  const run = rememberedRun();
  if (!run) return;
  const settings = readInfraSettings();
  if (settings.dataDir !== run.dataDir) return; // not the servers globalSetup looked at
  await stopStartedServers(settings, run.before, (line) => void process.stderr.write(`${line}\n`));
}
