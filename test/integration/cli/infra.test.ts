import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readInfraSettings } from '../../../infra/settings';
import { freePort } from '../../../workers/observability/metrics-server';
import { runCli } from '../../support/servers';

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, env, { timeoutMs: 120_000 });

describe('kafka-flow-temporal infra', () => {
  test('up is a no-op in seconds when everything already runs (globalSetup brought it up)', async () => {
    const t0 = Date.now();
    const r = await cli(['infra', 'up']);
    expect(r.code).toBe(0);
    const s = readInfraSettings();
    expect(r.out).toContain(`kafka      4.3.1      ${s.kafka.host}:${s.kafka.port}`);
    expect(r.out).toMatch(/kafka .* already running/);
    expect(r.out).toMatch(/temporal .* already running/);
    expect(r.out).toMatch(/cassandra .* already running/);
    expect(r.out).toContain(`http://${s.temporal.host}:${s.temporal.uiPort}/namespaces/${s.temporal.namespace}/workflows`);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });

  test('a server killed by hand shows as died; down then up brings it back', async () => {
    // A private Temporal server (fast to start) on its own ports and data dir: the shared ones stay up.
    // Free ports, not fixed ones: another run of this suite (a second checkout) may be at this step too.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-infra-'));
    const port = await freePort();
    const env = {
      KFT_INFRA_SERVERS: 'temporal',
      KFT_DATA_DIR: dataDir,
      TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
      TEMPORAL_UI_PORT: String(await freePort()),
    };
    try {
      const first = await cli(['infra', 'up'], env);
      expect(first.out).toMatch(/temporal .* started in/);
      expect(first.code).toBe(0);
      expect((await cli(['infra', 'status'], env)).out).toMatch(new RegExp(`temporal\\s+running\\s+127\\.0\\.0\\.1:${port}\\s+pid \\d+`));

      const pid = Number(fs.readFileSync(path.join(dataDir, 'run', 'temporal.pid'), 'utf8'));
      process.kill(pid, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 500));
      const died = await cli(['infra', 'status'], env);
      expect(died.code).toBe(1);
      expect(died.out).toMatch(/temporal\s+died .*process gone; see .*temporal\.log/);

      expect((await cli(['infra', 'down'], env)).out).toMatch(/temporal\s+not-running/);
      const again = await cli(['infra', 'up'], env);
      expect(again.code).toBe(0);
      expect(again.out).toMatch(/temporal .* started in/);
      expect((await cli(['infra', 'down'], env)).out).toMatch(/temporal\s+stopped/);
      expect((await cli(['infra', 'status'], env)).out).toMatch(/temporal\s+stopped/);
    } finally {
      await cli(['infra', 'down'], env);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('a bad environment value is one line naming the variable, exit code 2', async () => {
    const r = await cli(['infra', 'status'], { KAFKA_BROKERS: '127.0.0.1:abc' });
    expect(r.code).toBe(2);
    expect(r.out.trim()).toBe(
      `kafka-flow-temporal: ConfigError: KAFKA_BROKERS="127.0.0.1:abc": '127.0.0.1:abc' is not host:port (e.g. 127.0.0.1:9092)`,
    );
  });
});
