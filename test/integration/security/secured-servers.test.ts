import fs from 'node:fs';
import path from 'node:path';
import { readKafkaSecurity } from '../../../config/security';
import { portOpen } from '../../../config/net';
import { keyHash } from '../../../core/redact';
import { up } from '../../../infra/infra';
import { readSecretFile, type SecureMaterial, secureMaterial } from '../../../infra/secure-material';
import { readInfraSettings } from '../../../infra/settings';
import { createKafkaClient, KafkaAdmin } from '../../../kafka';
import { assertFencedTxnOffsetCommit } from '../../../kafka/broker-versions';
import { eventually } from '../../support/eventually';
import { historyText, kafkaBrokers, runCli, startCli, temporalAddress, topicWith, unique } from '../../support/servers';

/**
 * Production connectivity on real secured servers (README, Production connectivity): the broker's
 * SASL_SSL and mTLS listeners, the TLS endpoint in front of Temporal (API key or mTLS), and a
 * Cassandra node with PasswordAuthenticator and client encryption — all started by `infra`
 * (the last two only here, in beforeAll). Workers run through the CLI, configured by environment
 * variables only, and their every log line and their workflows' histories are searched for the
 * secrets and for the records' keys and values.
 */
const root = path.join(__dirname, '../../..');
const flowModule = path.join(root, 'test/fixtures/secured-flow.ts');
const settings = readInfraSettings();
const host = settings.kafka.host;
let m: SecureMaterial;

beforeAll(async () => {
  for (const port of [settings.kafka.saslSslPort, settings.kafka.sslPort]) {
    if (!(await portOpen(host, port))) {
      throw new Error(
        `the Kafka broker at ${kafkaBrokers[0]} has no secured listener on ${host}:${port}: it was started before infra added them; ` +
          'restart it (`npm run infra:down && npm run infra:up`)',
      );
    }
  }
  await up({ ...settings, servers: ['temporal-tls', 'cassandra-secure'] }, (line) => process.stderr.write(`[infra] ${line}\n`));
  m = secureMaterial(settings.dataDir);
}, 300_000);

const kafkaPassword = () => readSecretFile(m.kafkaPasswordFile);
const apiKey = () => readSecretFile(m.temporalApiKeyFile);
const cassandraPassword = () => readSecretFile(m.cassandraPasswordFile);

/** SASL_SSL with SCRAM-SHA-256, the password inline in the environment (the most exposed way). */
const kafkaScramEnv = () => ({
  KAFKA_BROKERS: `${host}:${settings.kafka.saslSslPort}`,
  KAFKA_SSL_CA_PATH: m.caCert,
  KAFKA_SASL_MECHANISM: 'scram-sha-256',
  KAFKA_SASL_USERNAME: m.kafkaUser,
  KAFKA_SASL_PASSWORD: kafkaPassword(),
});
/** The SSL listener with a client certificate (mTLS). */
const kafkaMtlsEnv = () => ({ KAFKA_BROKERS: `${host}:${settings.kafka.sslPort}`, KAFKA_SSL_CA_PATH: m.caCert, KAFKA_SSL_CERT_PATH: m.clientCert, KAFKA_SSL_KEY_PATH: m.clientKey });
const temporalApiKeyEnv = () => ({ TEMPORAL_ADDRESS: `${host}:${settings.temporalTls.port}`, TEMPORAL_TLS_SERVER_CA_CERT_PATH: m.caCert, TEMPORAL_API_KEY: apiKey() });
const temporalMtlsEnv = () => ({
  TEMPORAL_ADDRESS: `${host}:${settings.temporalTls.port}`,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: m.caCert,
  TEMPORAL_TLS_CLIENT_CERT_PATH: m.clientCert,
  TEMPORAL_TLS_CLIENT_KEY_PATH: m.clientKey,
});
const cassandraEnv = () => ({
  CASSANDRA_CONTACT_POINTS: `${host}:${settings.cassandraSecure.port}`,
  CASSANDRA_USERNAME: m.cassandraUser,
  CASSANDRA_PASSWORD_FILE: m.cassandraPasswordFile,
  CASSANDRA_TLS_CA_PATH: m.caCert,
  CASSANDRA_TLS_CERT_PATH: m.clientCert,
  CASSANDRA_TLS_KEY_PATH: m.clientKey,
});

/** No variable of the shell leaks in: only what a test sets (plus PATH/HOME for node). */
const baseEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, KFT_EXIT_WITH_PARENT: '0', KAFKAJS_NO_PARTITIONER_WARNING: '1' });

const cli = (args: string[], env: NodeJS.ProcessEnv) => runCli(args, env, { timeoutMs: 90_000, inherit: baseEnv() });
const startWorker = (env: NodeJS.ProcessEnv, extraArgs: string[] = []) => startCli(['worker', flowModule, ...extraArgs], env, baseEnv());

/** The flow's input: partition 0 holds a record the fold refuses, partition 1 good records and one that is not JSON. */
function produceInput(topic: string, keyPrefix: string, valueMark: string, goodKeys: string[]): Promise<void> {
  return topicWith(topic, 2, [
    { partition: 0, key: `${keyPrefix}-refused`, value: JSON.stringify({ amount: 1, refuse: true, note: valueMark }) },
    ...goodKeys.flatMap((key) => [1, 2, 3, 4, 5].map((amount) => ({ partition: 1, key, value: JSON.stringify({ amount, note: valueMark }) }))),
    { partition: 1, key: `${keyPrefix}-undecodable`, value: `this is not JSON: ${valueMark}` },
  ]);
}

async function inspected(env: NodeJS.ProcessEnv, key: string): Promise<unknown> {
  const r = await cli(['inspect', flowModule, '--key', key], env);
  if (r.code !== 0) throw new Error(`inspect exited ${r.code}: ${r.out}`);
  const line = r.out.split('\n').find((l) => l.startsWith('{'));
  return line ? (JSON.parse(line) as { state: unknown }).state : undefined;
}

function assertNothingLeaked(text: string, what: string, secrets: Record<string, string>): void {
  for (const [name, secret] of Object.entries(secrets)) {
    if (text.includes(secret)) throw new Error(`${what} contains ${name}`);
  }
}

describe('production connectivity on secured servers', () => {
  test('a worker over SASL_SSL (SCRAM-SHA-256) and Temporal TLS with an API key, transactional Kafka persistence: folds and persists; no secret, key or value in its logs or workflow histories', async () => {
    const names = { TEST_FLOW_NAME: unique('sec'), TEST_FLOW_GROUP: unique('sec-group'), TEST_FLOW_TOPIC: unique('sec-topic') };
    const keyPrefix = unique('KEYMARK');
    const valueMark = unique('VALUEMARK');
    const goodKey = `${keyPrefix}-good`;
    await produceInput(names.TEST_FLOW_TOPIC, keyPrefix, valueMark, [goodKey]);
    const env = { ...kafkaScramEnv(), ...temporalApiKeyEnv(), ...names, LOG_LEVEL: 'debug', TEMPORAL_LOG_LEVEL: 'info' };
    const worker = startWorker(env, ['--metrics-port', '0']);
    try {
      await eventually('the worker to persist the good key (read back with inspect over SASL_SSL)', async () => {
        if (worker.child.exitCode !== null) throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.output()}`);
        const state = (await inspected({ ...kafkaScramEnv(), ...names }, goodKey)) as { count: number; total: number } | undefined;
        return state?.count === 5 && state.total === 15;
      }, 120_000, () => `the worker's last output lines:\n${worker.output().split('\n').slice(-40).join('\n')}`);
      // The refused record stopped partition 0; its failure, with the key as a hash and the fold's
      // own message withheld (logKeys is off), reaches Temporal.
      const refusedHash = `#${keyHash(`${keyPrefix}-refused`)}`;
      const workflowId = (p: number) => `kafka-flow/${names.TEST_FLOW_NAME}/${names.TEST_FLOW_TOPIC}/${p}`;
      const history0 = await eventually('the fold failure in partition 0\'s workflow history', async () => {
        const h = await historyText(workflowId(0));
        return h.includes(refusedHash) && h.includes('FoldError') ? h : undefined;
      }, 60_000);
      expect(history0).toContain('Error: [redacted: logKeys is off]');
      expect(history0).not.toContain('this record is refused by the fold');
      // /metrics binds 127.0.0.1 only: another loopback address is refused.
      const url = /"metrics":"(http:\/\/127\.0\.0\.1:(\d+)\/metrics)"/.exec(worker.output());
      expect(url).not.toBeNull();
      expect((await fetch(url![1]!)).status).toBe(200);
      expect(await portOpen('127.0.0.2', Number(url![2]), 1000)).toBe(false);

      expect(await worker.stop()).toBe(0);
      const logs = worker.output();
      const history1 = await historyText(workflowId(1));
      expect(logs).toMatch(/"msg":"worker started"/);
      expect(logs).toContain('"kafkaSecurity":"SASL_SSL scram-sha-256 as kft_client"');
      expect(logs).toContain('"temporalSecurity":"TLS with an API key"');
      expect(logs).toMatch(/skipped an undecodable record/);
      expect(logs).toContain(refusedHash);
      const secrets = { 'the SASL password': kafkaPassword(), 'the API key': apiKey(), 'a record key': keyPrefix, 'a record value': valueMark };
      assertNothingLeaked(logs, 'the worker\'s output', secrets);
      assertNothingLeaked(history0, 'partition 0\'s history', secrets);
      assertNothingLeaked(history1, 'partition 1\'s history', secrets);
    } finally {
      await worker.stop();
    }
  }, 240_000);

  test('with logKeys: true the same failure names the key (the switch works both ways)', async () => {
    const names = { TEST_FLOW_NAME: unique('sec-keys'), TEST_FLOW_GROUP: unique('sec-keys-group'), TEST_FLOW_TOPIC: unique('sec-keys-topic') };
    const keyPrefix = unique('KEYMARK');
    await produceInput(names.TEST_FLOW_TOPIC, keyPrefix, unique('VALUEMARK'), []);
    const worker = startWorker({ ...kafkaMtlsEnv(), ...temporalMtlsEnv(), ...names, TEST_LOG_KEYS: '1' });
    try {
      // The refused key, and the `worker started` line (it can come after the first folds on a loaded machine).
      await eventually('the refused key and the start line in the worker\'s log', async () => {
        if (worker.child.exitCode !== null) throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.output()}`);
        return worker.output().includes(`${keyPrefix}-refused`) && worker.output().includes('"msg":"worker started"');
      }, 90_000);
      expect(worker.output()).toContain('"kafkaSecurity":"SSL with a client certificate"');
      expect(worker.output()).toContain('"temporalSecurity":"TLS with a client certificate"');
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  }, 180_000);

  test('a worker over Kafka mTLS and Temporal mTLS persisting to Cassandra with a password and client encryption (mTLS)', async () => {
    const names = { TEST_FLOW_NAME: unique('sec_cass'), TEST_FLOW_GROUP: unique('sec-cass-group'), TEST_FLOW_TOPIC: unique('sec-cass-topic'), TEST_FLOW_BACKEND: 'cassandra' };
    const keyPrefix = unique('KEYMARK');
    const valueMark = unique('VALUEMARK');
    const goodKey = `${keyPrefix}-good`;
    await produceInput(names.TEST_FLOW_TOPIC, keyPrefix, valueMark, [goodKey]);
    const worker = startWorker({ ...kafkaMtlsEnv(), ...temporalMtlsEnv(), ...cassandraEnv(), ...names, LOG_LEVEL: 'debug' });
    try {
      await eventually('the worker to persist the good key to the secured Cassandra (read back with inspect)', async () => {
        if (worker.child.exitCode !== null) throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.output()}`);
        const state = (await inspected({ ...kafkaMtlsEnv(), ...cassandraEnv(), ...names }, goodKey)) as { count: number; total: number } | undefined;
        return state?.count === 5 && state.total === 15;
      }, 150_000, () => `the worker's last output lines:\n${worker.output().split('\n').slice(-40).join('\n')}`);
      expect(await worker.stop()).toBe(0);
      expect(worker.output()).toContain('"cassandraSecurity":"TLS with a client certificate as kft_client"');
      assertNothingLeaked(worker.output(), 'the worker\'s output', { 'the Cassandra password': cassandraPassword(), 'a record key': keyPrefix, 'a record value': valueMark });
    } finally {
      await worker.stop();
    }
  }, 240_000);

  describe('bad credentials: one line naming the server and the variable, exit 1, the secret not shown', () => {
    const oneLine = (out: string) => {
      const lines = out.trim().split('\n').filter((l) => !l.includes('DeprecationWarning') && !l.includes('--trace-deprecation'));
      expect(lines).toHaveLength(1);
      return lines[0]!;
    };

    test('Kafka: a wrong SCRAM password', async () => {
      const r = await cli(['worker', flowModule], { ...kafkaScramEnv(), KAFKA_SASL_PASSWORD: 'wrong-password-123' });
      expect(r.code).toBe(1);
      expect(oneLine(r.out)).toMatch(
        new RegExp(`^kafka-flow-temporal: KafkaAuthenticationError: Kafka at KAFKA_BROKERS=${host}:${settings.kafka.saslSslPort} refused the SASL credentials: check KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD`),
      );
      expect(r.out).not.toContain('wrong-password-123');
    }, 60_000);

    test('Kafka: no client certificate for the mTLS listener', async () => {
      const r = await cli(['worker', flowModule], { KAFKA_BROKERS: `${host}:${settings.kafka.sslPort}`, KAFKA_SSL_CA_PATH: m.caCert });
      expect(r.code).toBe(1);
      expect(oneLine(r.out)).toMatch(/^kafka-flow-temporal: KafkaAuthenticationError: Kafka at KAFKA_BROKERS=\S+ requires a client certificate: check KAFKA_SSL_CERT_PATH, KAFKA_SSL_KEY_PATH/);
    }, 60_000);

    test('Temporal: a wrong API key', async () => {
      const r = await cli(['worker', flowModule], { KAFKA_BROKERS: kafkaBrokers.join(','), ...temporalApiKeyEnv(), TEMPORAL_API_KEY: 'wrong-api-key-123' });
      expect(r.code).toBe(1);
      expect(oneLine(r.out)).toMatch(
        new RegExp(`^kafka-flow-temporal: TemporalAuthenticationError: Temporal at TEMPORAL_ADDRESS=${host}:${settings.temporalTls.port} refused the credentials: check TEMPORAL_API_KEY`),
      );
      expect(r.out).not.toContain('wrong-api-key-123');
    }, 60_000);

    test('Cassandra: a wrong password', async () => {
      const passwordFile = path.join(m.dir, '..', `wrong-cassandra-password-${process.pid}`);
      fs.writeFileSync(passwordFile, 'wrong-cassandra-123\n');
      try {
        const r = await cli(['worker', flowModule], {
          KAFKA_BROKERS: kafkaBrokers.join(','),
          TEMPORAL_ADDRESS: temporalAddress,
          ...cassandraEnv(),
          CASSANDRA_PASSWORD_FILE: passwordFile,
          TEST_FLOW_BACKEND: 'cassandra',
        });
        expect(r.code).toBe(1);
        expect(oneLine(r.out)).toMatch(
          new RegExp(`^kafka-flow-temporal: CassandraAuthenticationError: Cassandra at CASSANDRA_CONTACT_POINTS=${host}:${settings.cassandraSecure.port} refused the credentials: check CASSANDRA_USERNAME, CASSANDRA_PASSWORD`),
        );
        expect(r.out).not.toContain('wrong-cassandra-123');
      } finally {
        fs.rmSync(passwordFile, { force: true });
      }
    }, 60_000);
  });

  test('SASL PLAIN, SCRAM-SHA-512 and OAUTHBEARER (a token provider module) each carry a record through the SASL_SSL listener; the broker takes TxnOffsetCommit v3', async () => {
    const topic = unique('sec-mechanisms');
    const plain = createKafkaClient({ brokers: kafkaBrokers, clientId: unique('sec'), logLevel: 'nothing' });
    const admin = new KafkaAdmin(plain);
    await admin.connect();
    await admin.ensureTopics([{ topic, partitions: 1 }]);
    await admin.close();
    const common = { KAFKA_SSL_CA_PATH: m.caCert };
    const variants: Record<string, NodeJS.ProcessEnv> = {
      plain: { ...common, KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: m.kafkaUser, KAFKA_SASL_PASSWORD_FILE: m.kafkaPasswordFile },
      'scram-sha-512': { ...common, KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: m.kafkaUser, KAFKA_SASL_PASSWORD_FILE: m.kafkaPasswordFile },
      oauthbearer: { ...common, KAFKA_SASL_MECHANISM: 'oauthbearer', KAFKA_SASL_OAUTHBEARER_PROVIDER: path.join(root, 'test/fixtures/unsecured-jwt-provider.js') },
    };
    for (const [mechanism, env] of Object.entries(variants)) {
      const client = createKafkaClient({ brokers: [`${host}:${settings.kafka.saslSslPort}`], clientId: unique(mechanism), logLevel: 'nothing', security: readKafkaSecurity(env) });
      const producer = client.kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: [{ key: mechanism, value: mechanism }] });
      await producer.disconnect();
      if (mechanism === 'plain') await assertFencedTxnOffsetCommit(client, unique('group'));
    }
    const consumer = plain.kafka.consumer({ groupId: unique('sec-read') });
    const seen: string[] = [];
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void seen.push(String(message.value)) });
    await eventually('the three records', () => seen.length >= 3, 30_000);
    await consumer.disconnect();
    expect(seen.sort()).toEqual(['oauthbearer', 'plain', 'scram-sha-512']);
  }, 120_000);
});
