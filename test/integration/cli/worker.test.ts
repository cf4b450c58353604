import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = path.join(__dirname, '../../..');
const bin = path.join(root, 'bin/kafka-flow-temporal.js');
const flow = path.join(root, 'test/fixtures/offsetHashFlow.ts');

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string }> {
  try {
    const r = await run(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, timeout: 60_000 });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

// The public CLI's failure modes: each a single line that names what to fix, never a stack trace.
describe('kafka-flow-temporal worker / status / inspect errors', () => {
  test('no Kafka at KAFKA_BROKERS', async () => {
    const r = await cli(['worker', flow], { KAFKA_BROKERS: '127.0.0.1:1' });
    expect(r.code).toBe(1);
    expect(r.out.trim()).toBe(
      'kafka-flow-temporal: KafkaUnreachableError: no Kafka broker answers at KAFKA_BROKERS=127.0.0.1:1; start one with `npm run infra:up` or point KAFKA_BROKERS at yours',
    );
  });

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
