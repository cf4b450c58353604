
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TcpProxy } from '../../../chaos/tcp-proxy';
import { pinoLine } from '../../support/pino-lines';
import { kafkaBrokers, runCli } from '../../support/servers';

const [kafkaHost, kafkaPort] = ((broker: string) => [broker.slice(0, broker.lastIndexOf(':')), Number(broker.slice(broker.lastIndexOf(':') + 1))] as const)(kafkaBrokers[0]!);
const root = path.join(__dirname, '../../..');
const flow = path.join(root, 'test/fixtures/offset-hash-flow.ts');

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, env);

// The public CLI's failure modes: each a single line that names what to fix, never a stack trace.
describe('kafka-flow-temporal worker / status / inspect errors', () => {
  test('no Kafka at KAFKA_BROKERS', async () => {
    const r = await cli(['worker', flow], { KAFKA_BROKERS: '127.0.0.1:1' });
    expect(r.code).toBe(1);
    expect(r.out.trim()).toBe(
      'kafka-flow-temporal: KafkaUnreachableError: no Kafka broker answers at KAFKA_BROKERS=127.0.0.1:1; start one with `npm run infra:up` or point KAFKA_BROKERS at yours',
    );
  });

  test('brokers that accept connections and drop them (a network fault during start): one typed line, exit 1; before it, one log format', async () => {
    // A loopback proxy in front of the real broker that closes every connection it accepts: the
    // port answers, so only kafkajs, after its retries, finds out; the worker must still say so in
    // one line naming KAFKA_BROKERS (the chaos suite saw a raw kafkajs stack here).
    const proxy = new TcpProxy('kafka', 0, { host: kafkaHost, port: kafkaPort });
    await proxy.start();
    proxy.setMode('drop');
    try {
      // TEMPORAL_LOG_LEVEL=info: Temporal core narrates its workers' start, so its lines are in the run too.
      const r = await cli(['worker', flow], { KAFKA_BROKERS: `127.0.0.1:${proxy.port}`, TEMPORAL_LOG_LEVEL: 'info' });
      expect(r.code).toBe(1);
      const lines = r.out.trim().split('\n');
      const last = lines.pop();
      expect(last).toMatch(
        new RegExp(`^kafka-flow-temporal: KafkaUnreachableError: the Kafka brokers at KAFKA_BROKERS=127\\.0\\.0\\.1:${proxy.port} kept closing the connection while the worker joined the group \\(KafkaJS\\w+: `),
      );
      expect(r.out).not.toMatch(/^\s+at /m); // no stack trace
      expect(proxy.stats.dropped).toBeGreaterThan(0);
      // Every line before that one is a pino JSON line — the worker's own, kafkajs's (its
      // connection errors, forwarded by the client's log creator) and Temporal core's (forwarded by
      // the runtime) alike — stdout and stderr both.
      expect(lines.filter((line) => pinoLine(line) === undefined)).toEqual([]);
      const parsed = lines.map((line) => pinoLine(line)!);
      expect(parsed.filter((l) => l.component === 'kafkajs').length).toBeGreaterThan(0);
      expect(parsed.filter((l) => l.sdkComponent === 'core').length).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  }, 90_000);

  test('no Temporal at TEMPORAL_ADDRESS', async () => {
    const r = await cli(['status', flow], { TEMPORAL_ADDRESS: '127.0.0.1:2' });
    expect(r.code).toBe(1);
    expect(r.out.trim().split('\n')).toHaveLength(1);
    expect(r.out).toMatch(/^kafka-flow-temporal: TemporalUnreachableError: no Temporal server answers at TEMPORAL_ADDRESS=127\.0\.0\.1:2 .*npm run infra:up/);
  });

  test('a flow module that is missing, or exports no flow', async () => {
    const missing = await cli(['worker', 'no/such/flow.ts']);
    expect(missing.code).toBe(2);
    expect(missing.out.trim()).toMatch(/^kafka-flow-temporal: ConfigError: flow module no\/such\/flow\.ts not found/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cli-'));
    const notAFlow = path.join(dir, 'x.ts');
    fs.writeFileSync(notAFlow, 'export const answer = 42;\n');
    const wrong = await cli(['inspect', notAFlow]);
    expect(wrong.code).toBe(2);
    expect(wrong.out.trim()).toMatch(/does not export a flow: export default defineFlow/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('inspect of a memory-backed flow says why it cannot', async () => {
    const r = await cli(['inspect', flow], { TEST_FLOW_BACKEND: 'memory' });
    expect(r.code).toBe(2);
    expect(r.out.trim()).toMatch(/uses the memory backend: its state lives inside each worker process/);
  });

  test('a bounded state cache without local state: a ConfigError before anything connects', async () => {
    const r = await cli(['worker', flow], { KFT_STATE_CACHE_MAX_KEYS: '1000', KFT_STATE_DIR: '' });
    expect(r.code).toBe(2);
    expect(r.out.trim()).toMatch(/^kafka-flow-temporal: ConfigError: flow "[^"]+": KFT_STATE_CACHE_MAX_KEYS \(the keys out of memory are read from the local store\) needs local state: Kafka persistence/);
  });

  test('an invalid flow definition names the field', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-cli-'));
    const bad = path.join(dir, 'bad.ts');
    fs.writeFileSync(bad, `import { defineFlow } from '${root}/index';\nexport default defineFlow({ name: 'x', groupId: 'g', topics: [], fold: (s: unknown) => s } as never);\n`);
    const r = await cli(['status', bad]);
    expect(r.code).toBe(2);
    expect(r.out.trim()).toMatch(/^kafka-flow-temporal: ConfigError: invalid flow definition "x": topics: /);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
