import { formatFatal } from '../../config/errors';
import { status, up } from '../../infra/infra';
import { readInfraSettings } from '../../infra/settings';
import { keepInfra, livePids, rememberRun, stopStartedServers } from './run-servers';

const write = (line: string) => void process.stderr.write(`${line}\n`);

/**
 * Integration tests run against the real servers. Once per run: bring up whatever is not running
 * (fetching on first use), or — with KFT_TEST_START_INFRA=0 — only check they answer. A missing
 * server is a failure that says how to start it, never a skip. What this run starts is stopped
 * when it ends (test/support/global-teardown.ts), unless KFT_TEST_KEEP_INFRA=1.
 */
export default async function globalSetup(): Promise<void> {
  const settings = readInfraSettings();
  const start = process.env.KFT_TEST_START_INFRA !== '0';
  const before = livePids(settings);
  rememberRun({ dataDir: settings.dataDir, before });
  try {
    if (start) {
      const results = await up(settings, (line) => write(`[infra] ${line}`));
      const started = results.filter((r) => r.action === 'started');
      if (started.length > 0) {
        const after = keepInfra()
          ? 'they stay running after it (KFT_TEST_KEEP_INFRA=1; `npm run infra:down` stops them)'
          : 'stopped when it ends (KFT_TEST_KEEP_INFRA=1 keeps them)';
        write(`[infra] started ${started.map((r) => r.name).join(', ')} for this run: ${after}`);
      }
      return;
    }
    const down = (await status(settings)).filter((r) => r.state !== 'running' && r.state !== 'running-external');
    if (down.length > 0) throw new Error(`not answering: ${down.map((r) => `${r.name} at ${r.address} (${r.state})`).join(', ')}`);
  } catch (err) {
    // jest runs no globalTeardown after a failed globalSetup: stop here what this setup started.
    await stopStartedServers(settings, before, write).catch(() => undefined);
    throw new Error(
      `Integration tests need Kafka, Temporal and Cassandra running.\n${formatFatal(err)}\n` +
        'Start them with `npm run infra:up` (see `npm run infra:status`), then run the tests again.',
    );
  }
}
