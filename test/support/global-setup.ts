import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { formatFatal } from '../../config/errors';
import { status, up } from '../../infra/infra';
import { readInfraSettings } from '../../infra/settings';
import { keepInfra, livePids, rememberRun, stopStartedServers } from './run-servers';
import { INFRA_STATUS_ENV, type InfraStatus } from './servers-ready';

const write = (line: string) => void process.stderr.write(`${line}\n`);

const HOW_TO_START = 'Start them with `npm run infra:up` (see `npm run infra:status`), then run the tests again.';

/**
 * Integration tests run against the real servers. Once per run: bring up whatever is not running
 * (fetching on first use), or — with KFT_TEST_START_INFRA=0 — only check they answer. A missing
 * server is a failure that says how to start it, never a skip. What this run starts is stopped
 * when it ends (test/support/global-teardown.ts), unless KFT_TEST_KEEP_INFRA=1.
 *
 * The servers come up while the run goes on: the unit tests (and the quick chaos run's wait) use
 * the minute a cold start takes, and each integration file waits for them first
 * (test/support/servers-ready.ts: the status file named by KFT_TEST_INFRA_STATUS, which the test
 * processes inherit), failing with this message if they did not come up.
 */
export default async function globalSetup(): Promise<void> {
  const settings = readInfraSettings();
  const start = process.env.KFT_TEST_START_INFRA !== '0';
  const before = livePids(settings);
  const statusFile = path.join(os.tmpdir(), `kft-test-infra-${process.pid}-${Date.now()}.json`);
  process.env[INFRA_STATUS_ENV] = statusFile;
  const settle = (s: InfraStatus) => fs.writeFileSync(statusFile, JSON.stringify(s));
  const failure = (err: unknown) => `Integration tests need Kafka, Temporal and Cassandra running.\n${formatFatal(err)}\n${HOW_TO_START}`;
  if (!start) {
    const down = (await status(settings)).filter((r) => r.state !== 'running' && r.state !== 'running-external');
    if (down.length > 0) throw new Error(failure(new Error(`not answering: ${down.map((r) => `${r.name} at ${r.address} (${r.state})`).join(', ')}`)));
    settle({ ready: true });
    rememberRun({ dataDir: settings.dataDir, before, statusFile });
    return;
  }
  const starting = up(settings, (line) => write(`[infra] ${line}`)).then(
    (results) => {
      const started = results.filter((r) => r.action === 'started');
      if (started.length > 0) {
        const after = keepInfra()
          ? 'they stay running after it (KFT_TEST_KEEP_INFRA=1; `npm run infra:down` stops them)'
          : 'stopped when it ends (KFT_TEST_KEEP_INFRA=1 keeps them)';
        write(`[infra] started ${started.map((r) => r.name).join(', ')} for this run: ${after}`);
      }
      settle({ ready: true });
    },
    async (err: unknown) => {
      // Stop at once what this start did bring up; every integration file fails with the message.
      await stopStartedServers(settings, before, write).catch(() => undefined);
      settle({ ready: false, error: failure(err) });
    },
  );
  rememberRun({ dataDir: settings.dataDir, before, statusFile, starting });
}
