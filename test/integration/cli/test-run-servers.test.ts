import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { down, status, up } from '../../../infra/infra';
import { readInfraSettings } from '../../../infra/settings';
import { freePort } from '../../../workers/observability/metrics-server';

const run = promisify(execFile);
const root = path.join(__dirname, '../../..');

/**
 * `npm test` as a user runs it, on a private Temporal server (own ports and data directory: the
 * shared servers are never touched): jest itself, the integration project's globalSetup and
 * globalTeardown, one test that needs no server. A server the run started is stopped when the run
 * ends (unless KFT_TEST_KEEP_INFRA=1, which says how to stop it); one that ran before is left alone;
 * one that cannot start fails the run with the reason and how to start it.
 */
describe('the servers of a test run', () => {
  let env: NodeJS.ProcessEnv;
  let dataDir: string;

  beforeEach(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-run-servers-'));
    env = {
      KFT_INFRA_SERVERS: 'temporal',
      KFT_DATA_DIR: dataDir,
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      TEMPORAL_UI_PORT: String(await freePort()),
    };
  });

  afterEach(async () => {
    await down(readInfraSettings({ ...process.env, ...env }));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** One jest run of a test that needs no server, with `extra` in its environment; its stderr. */
  async function jestRun(extra: NodeJS.ProcessEnv = {}): Promise<string> {
    const args = [
      path.join(root, 'node_modules/jest/bin/jest.js'),
      '--selectProjects',
      'integration',
      '--reporters=default', // not the totals reporter: .jest-results.json is the outer run's
      '--runTestsByPath',
      'test/integration/cli/infra.test.ts',
      '-t',
      'a bad environment value',
    ];
    // The inner run starts what it needs whatever the outer run was told (KFT_TEST_START_INFRA=0 there).
    const r = await run(process.execPath, args, { cwd: root, env: { ...process.env, KFT_TEST_START_INFRA: '1', ...env, ...extra }, timeout: 180_000 });
    return r.stderr;
  }

  const temporalState = async () => (await status(readInfraSettings({ ...process.env, ...env }))).find((s) => s.name === 'temporal')?.state;

  test('a server the run started is stopped when it ends', async () => {
    const out = await jestRun();
    expect(out).toContain('[infra] started temporal for this run: stopped when it ends (KFT_TEST_KEEP_INFRA=1 keeps them)');
    expect(out).toMatch(/\[infra\] stopped what this run started: temporal (stopped|killed)/);
    expect(await temporalState()).toBe('stopped');
  }, 240_000);

  test('KFT_TEST_KEEP_INFRA=1 leaves it running and says how to stop it', async () => {
    const out = await jestRun({ KFT_TEST_KEEP_INFRA: '1' });
    expect(out).toContain('[infra] started temporal for this run: they stay running after it (KFT_TEST_KEEP_INFRA=1; `npm run infra:down` stops them)');
    expect(out).toContain('[infra] leaving temporal running (KFT_TEST_KEEP_INFRA=1): the next run reuses them; `npm run infra:down` stops them');
    expect(await temporalState()).toBe('running');
  }, 240_000);

  test('a server that cannot start fails the run with the reason and how to start it', async () => {
    // Temporal's port held by something else: its start fails.
    const [host, port] = env.TEMPORAL_ADDRESS!.split(':');
    const sockets = new Set<net.Socket>();
    const squatter = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => squatter.listen(Number(port), host, () => resolve()));
    try {
      const failed = await jestRun().then(
        () => undefined,
        (err: { code?: number; stderr?: string }) => err,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toContain('Integration tests need Kafka, Temporal and Cassandra running.');
      expect(failed?.stderr).toContain('ServerStartError: temporal exited before it became ready');
      expect(failed?.stderr).toContain('Start them with `npm run infra:up`');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((r) => squatter.close(r));
    }
  }, 240_000);

  test('a server that ran before the run is left running', async () => {
    await up(readInfraSettings({ ...process.env, ...env }));
    const out = await jestRun();
    expect(out).not.toContain('[infra] started');
    expect(out).not.toContain('[infra] stopped');
    expect(await temporalState()).toBe('running');
  }, 240_000);
});
