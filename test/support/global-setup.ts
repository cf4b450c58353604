import { formatFatal } from '../../config/errors';
import { status, up } from '../../infra/infra';
import { readInfraSettings } from '../../infra/settings';

/**
 * Integration tests run against the real servers. Once per run: bring up whatever is not running
 * (fetching on first use), or — with KFT_TEST_START_INFRA=0 — only check they answer. A missing
 * server is a failure that says how to start it, never a skip.
 */
export default async function globalSetup(): Promise<void> {
  const settings = readInfraSettings();
  const start = process.env.KFT_TEST_START_INFRA !== '0';
  try {
    if (start) {
      const results = await up(settings, (line) => process.stderr.write(`[infra] ${line}\n`));
      const started = results.filter((r) => r.action === 'started');
      if (started.length > 0) process.stderr.write(`[infra] started ${started.map((r) => r.name).join(', ')} for this run\n`);
      return;
    }
    const down = (await status(settings)).filter((r) => r.state !== 'running' && r.state !== 'running-external');
    if (down.length > 0) throw new Error(`not answering: ${down.map((r) => `${r.name} at ${r.address} (${r.state})`).join(', ')}`);
  } catch (err) {
    throw new Error(
      `Integration tests need Kafka, Temporal and Cassandra running.\n${formatFatal(err)}\n` +
        'Start them with `npm run infra:up` (see `npm run infra:status`), then run the tests again.',
    );
  }
}
