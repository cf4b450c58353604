// The registry of persistence backends (persistence/descriptors.ts): every backend's descriptor
// under its name, a typed refusal of an unknown name, what each backend can do, and the memory
// backend's refusal to be inspected — all without loading a backend's client library.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { ConfigError } from '../../../config/errors';
import { defineFlow } from '../../../define-flow';
import { backendDescriptors, backendsWith, descriptorOf, findDescriptor, lackOf, type ResolvedPersistence } from '../../../persistence/descriptors';
import { inspectFlow } from '../../../workers/cli/inspect';

const base = { groupId: 'g', topics: ['t'], fold: (n: number | undefined) => (n ?? 0) + 1 };

test('each backend is registered under the name that selects it', () => {
  expect(Object.keys(backendDescriptors)).toEqual(['memory', 'kafka', 'cassandra']);
  for (const [name, descriptor] of Object.entries(backendDescriptors)) {
    expect(descriptor.name).toBe(name);
    expect(descriptorOf(name)).toBe(descriptor);
    expect(findDescriptor(name)).toBe(descriptor);
  }
});

test('an unknown backend is a ConfigError naming the known ones', () => {
  expect(() => descriptorOf('redis')).toThrow(ConfigError);
  expect(() => descriptorOf('redis')).toThrow('unknown persistence backend "redis" (known: memory, kafka, cassandra)');
  expect(() => descriptorOf('toString')).toThrow(ConfigError); // an Object.prototype member is no backend
  expect(findDescriptor('redis')).toBeUndefined();
});

test.each([
  ['memory', { deadLetters: false, outputs: false, keyTimers: true }, 'memory', false, false],
  ['kafka', { deadLetters: true, outputs: true, keyTimers: true }, 'Kafka', false, false],
  ['cassandra', { deadLetters: true, outputs: true, keyTimers: true }, 'Cassandra', true, true],
])('%s: capabilities %j, titled %s, start-up check %s, worker-started fields %s', (name, capabilities, title, checksAtStart, describes) => {
  const d = descriptorOf(name);
  expect(d.capabilities).toEqual(capabilities);
  expect(d.title).toBe(title);
  expect(d.checkAtStart !== undefined).toBe(checksAtStart);
  expect(d.describe !== undefined).toBe(describes);
});

test("messages list the backends that have a capability in the registry's order", () => {
  expect(backendsWith('deadLetters')).toBe('Kafka or Cassandra');
  expect(backendsWith('outputs')).toBe('Kafka or Cassandra');
});

test.each<[ResolvedPersistence, string | undefined]>([
  [{ backend: 'memory', mode: 'snapshots' }, "backend 'memory'"],
  [{ backend: 'memory', mode: 'none' }, "backend 'memory'"],
  [{ backend: 'kafka', mode: 'none', transactional: true, maxWritesPerTransaction: 1, recoveryStallTimeoutMs: 1, snapshotTopic: undefined, compressionThreshold: 1, options: {} }, "mode 'none'"],
  [{ backend: 'kafka', mode: 'snapshots', transactional: true, maxWritesPerTransaction: 1, recoveryStallTimeoutMs: 1, snapshotTopic: undefined, compressionThreshold: 1, options: {} }, undefined],
  [{ backend: 'cassandra', mode: 'journal', compressionThreshold: 1, options: {} }, undefined],
])('what keeps %j from producing outputs: %s', (persistence, lack) => {
  expect(lackOf(persistence, 'outputs')).toBe(lack);
  expect(lackOf(persistence, 'deadLetters')).toBe(lack);
});

test("the cassandra backend's worker-started field describes its security", () => {
  const env = { security: { cassandra: {} } } as Parameters<NonNullable<ReturnType<typeof descriptorOf>['describe']>>[0];
  expect(Object.keys(descriptorOf('cassandra').describe?.(env) ?? {})).toEqual(['cassandraSecurity']);
});

test('inspect refuses a memory flow and an unregistered backend with ConfigErrors', async () => {
  const drain = async (flow: object) => {
    for await (const _ of inspectFlow(flow as never));
  };
  const memory = defineFlow({ ...base, name: 'mem' });
  await expect(drain(memory)).rejects.toThrow(
    new ConfigError('flow "mem" uses the memory backend: its state lives inside each worker process and cannot be inspected'),
  );
  const other = { ...memory, persistence: { backend: 'redis', mode: 'snapshots' } };
  await expect(drain(other)).rejects.toThrow(new ConfigError('inspect does not support the redis backend'));
});

test('defineFlow loads neither kafkajs nor the Cassandra driver (the descriptors require them when used)', () => {
  const root = path.join(__dirname, '../../..');
  const r = spawnSync(
    process.execPath,
    [
      '-e',
      `require('./bin/ts-loader.js'); require('./define-flow.ts');` +
        `console.log(Object.keys(require.cache).filter((k) => /node_modules\\/(kafkajs|cassandra-driver)\\//.test(k)).length)`,
    ],
    { cwd: root, encoding: 'utf8', timeout: 60_000 },
  );
  expect({ out: r.stdout.trim(), err: r.stderr }).toEqual({ out: '0', err: '' });
});
