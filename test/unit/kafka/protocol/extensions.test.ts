// The kafkajs patch's hooks into kafka/protocol/ (kafka/protocol/extensions.ts): registered by
// whatever makes a kafkajs client (newKafka, createCluster), loud when called before that, and
// complete (every hook the patched kafkajs calls has an implementation).
import fs from 'node:fs';
import path from 'node:path';
import { kafkajsExtensions } from '../../../../kafka/protocol/extensions';

const root = path.join(__dirname, '../../../..');

type ProduceRequest = (args: Record<string, unknown>) => { encode(): Promise<unknown> };
type Protocol = { protocol(args: { version: number }): (args: Record<string, unknown>) => unknown };
type Registry = { KafkaJSExtensionNotRegisteredError: new (hook: string) => Error };
type KafkajsErrors = { KafkaJSNonRetriableError: new (message: string) => Error };

const produce = { acks: -1, timeout: 1_000, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [{ key: 'k', value: 'v' }] }] }] };

/** Runs `run` with modules loaded afresh: a kafkajs nobody registered the hooks with yet. */
function withFreshModules(run: () => Promise<void>): Promise<void> {
  return jest.isolateModulesAsync(run);
}

describe('before the hooks are registered', () => {
  it('kafkajs fails loudly, with a typed non-retriable error naming the hook; it never falls back', async () => {
    await withFreshModules(async () => {
      const { KafkaJSExtensionNotRegisteredError } = require('kafkajs/src/protocol/extensions') as Registry;
      const { KafkaJSNonRetriableError } = require('kafkajs/src/errors') as KafkajsErrors;
      const produceV3 = require('kafkajs/src/protocol/requests/produce/v3/request') as ProduceRequest;
      const txnOffsetCommit = require('kafkajs/src/protocol/requests/txnOffsetCommit') as Protocol;
      const offsetFetch = require('kafkajs/src/protocol/requests/offsetFetch') as Protocol;

      const failure = await produceV3(produce)
        .encode()
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(KafkaJSExtensionNotRegisteredError);
      expect(failure).toBeInstanceOf(KafkaJSNonRetriableError);
      expect(failure).toMatchObject({ name: 'KafkaJSExtensionNotRegisteredError', hook: 'writeProduceBody', retriable: false });
      expect((failure as Error).message).toMatch(/"writeProduceBody" before the project registered it.*kafka\/client\.ts/);

      const args = { groupId: 'g', topics: [], transactionalId: 't', producerId: 1, producerEpoch: 0 };
      expect(() => txnOffsetCommit.protocol({ version: 3 })(args)).toThrow(KafkaJSExtensionNotRegisteredError);
      expect(() => offsetFetch.protocol({ version: 7 })(args)).toThrow(KafkaJSExtensionNotRegisteredError);
    });
  });
});

describe('registration', () => {
  it('newKafka registers the hooks before making a client', async () => {
    await withFreshModules(async () => {
      const produceV3 = require('kafkajs/src/protocol/requests/produce/v3/request') as ProduceRequest;
      const { newKafka } = require('../../../../kafka/client') as typeof import('../../../../kafka/client');
      newKafka({ brokers: ['127.0.0.1:1'] });
      await expect(produceV3(produce).encode()).resolves.toHaveProperty('buf');
    });
  });

  it('createCluster (the group-less readers) registers them too', async () => {
    await withFreshModules(async () => {
      const offsetFetch = require('kafkajs/src/protocol/requests/offsetFetch') as Protocol;
      const { createCluster } = require('../../../../kafka/internals') as typeof import('../../../../kafka/internals');
      const client = { brokers: ['127.0.0.1:1'], clientId: 't', logLevel: 0, logCreator: () => () => undefined, connection: {} };
      createCluster(client as never, 1);
      expect(offsetFetch.protocol({ version: 7 })({ groupId: 'g', topics: [] })).toHaveProperty('request.apiVersion', 7);
    });
  });

  it('every hook the patched kafkajs calls has an implementation, and no implementation goes unused', () => {
    const called = new Set<string>();
    const walk = (dir: string): void => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (entry.name.endsWith('.js')) for (const m of fs.readFileSync(file, 'utf8').matchAll(/\bextension\('(\w+)'\)/g)) called.add(m[1]!);
      }
    };
    walk(path.dirname(require.resolve('kafkajs/src/index.js')));
    expect([...called].sort()).toEqual(Object.keys(kafkajsExtensions).sort());
  });
});

test('every kafkajs client of the project is made by newKafka (kafka/client.ts) or createCluster (kafka/internals.ts)', () => {
  const made = /\bnew (Kafka|Cluster)\(/;
  const offenders: string[] = [];
  const skip = new Set(['node_modules', '.cache', '.git', 'dist', 'coverage', 'kafkajs-2.2.4-original']);
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (skip.has(entry.name)) continue;
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (/\.(ts|js)$/.test(entry.name) && made.test(fs.readFileSync(file, 'utf8'))) offenders.push(path.relative(root, file));
    }
  };
  walk(root);
  expect(offenders.sort()).toEqual(['kafka/client.ts', 'kafka/internals.ts']);
});
