import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');

/** A free loopback port (re-exported: tests take it from here). */
export { freePort } from '../../workers/observability/metrics-server';

/**
 * `infra up|down` of a private Cassandra (its own data dir and ports), for tests that break it:
 * the shared server is never touched. `pause`/`resume` freeze and thaw its process (a hung server:
 * connections stay open, requests time out).
 */
export function privateCassandra(dataDir: string, port: number, storagePort: number) {
  const env = {
    ...process.env,
    KFT_INFRA_SERVERS: 'cassandra',
    KFT_DATA_DIR: dataDir,
    CASSANDRA_CONTACT_POINTS: `127.0.0.1:${port}`,
    KFT_CASSANDRA_STORAGE_PORT: String(storagePort),
  };
  const infra = async (command: 'up' | 'down') => {
    try {
      await run(process.execPath, [path.join(ROOT, 'bin', 'kafka-flow-temporal.js'), 'infra', command], { env, timeout: 120_000 });
    } catch (err) {
      let log = '';
      try {
        log = readFileSync(path.join(dataDir, 'logs', 'cassandra.log'), 'utf8').split('\n').slice(-30).join('\n');
      } catch {
        // no log yet
      }
      throw new Error(`private Cassandra \`infra ${command}\` failed: ${(err as Error).message}\n${log}`);
    }
  };
  const pid = () => Number(readFileSync(path.join(dataDir, 'run', 'cassandra.pid'), 'utf8').trim());
  return {
    up: () => infra('up'),
    down: () => infra('down'),
    /** kill -9 of the server (no drain, no flush: what a crashed node leaves). */
    kill9: () => process.kill(pid(), 'SIGKILL'),
    pause: () => process.kill(pid(), 'SIGSTOP'),
    resume: () => process.kill(pid(), 'SIGCONT'),
    contactPoint: `127.0.0.1:${port}`,
  };
}
