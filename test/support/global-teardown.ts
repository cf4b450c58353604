import fs from 'node:fs';
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
  // A run that ended before its servers were up (every file failed, or was filtered out) stops them once they are.
  await run.starting;
  if (run.statusFile) fs.rmSync(run.statusFile, { force: true });
  const settings = readInfraSettings();
  if (settings.dataDir !== run.dataDir) return; // not the servers globalSetup looked at
  await stopStartedServers(settings, run.before, (line) => void process.stderr.write(`${line}\n`));
}
