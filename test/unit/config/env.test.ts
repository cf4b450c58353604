import path from 'node:path';
import { brokersFromEnv, readEnv, readWorkerEnv } from '../../../config/env';
import { ConfigError, formatFatal } from '../../../config/errors';
import { readInfraSettings } from '../../../infra/settings';

describe('environment variables', () => {
  test('defaults', () => {
    expect(readEnv({})).toEqual({
      kafkaBrokers: [{ host: '127.0.0.1', port: 9092 }],
      temporalAddress: { host: '127.0.0.1', port: 7233 },
      temporalNamespace: 'default',
      cassandraContactPoints: [{ host: '127.0.0.1', port: 9042 }],
    });
  });

  test('lists and IPv6', () => {
    const env = readEnv({ KAFKA_BROKERS: 'a:1, b:2', CASSANDRA_CONTACT_POINTS: '[::1]:9042' });
    expect(env.kafkaBrokers).toEqual([
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
    ]);
    expect(env.cassandraContactPoints).toEqual([{ host: '::1', port: 9042 }]);
  });

  test.each([
    ['KAFKA_BROKERS', '127.0.0.1:abc', /KAFKA_BROKERS="127.0.0.1:abc": '127.0.0.1:abc' is not host:port/],
    ['KAFKA_BROKERS', '127.0.0.1:70000', /KAFKA_BROKERS=.*is not host:port/],
    ['KAFKA_BROKERS', '', /KAFKA_BROKERS="": must list at least one host:port/],
    ['TEMPORAL_ADDRESS', 'localhost', /TEMPORAL_ADDRESS="localhost": 'localhost' is not host:port/],
    ['TEMPORAL_NAMESPACE', 'has space', /TEMPORAL_NAMESPACE=.*must be a Temporal namespace name/],
    ['CASSANDRA_CONTACT_POINTS', ':9042', /CASSANDRA_CONTACT_POINTS=.*is not host:port/],
  ])('%s=%j is a one-line ConfigError naming the variable', (name, value, message) => {
    let err: unknown;
    try {
      readEnv({ [name]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
    expect(formatFatal(err)).not.toContain('\n');
    expect(formatFatal(err)).toMatch(/^kafka-flow-temporal: ConfigError: /);
  });
});

describe('brokersFromEnv', () => {
  it('defaults to 127.0.0.1:9092 and splits a list', () => {
    expect(brokersFromEnv({})).toEqual(['127.0.0.1:9092']);
    expect(brokersFromEnv({ KAFKA_BROKERS: ' a:1, b:2 ,' })).toEqual(['a:1', 'b:2']);
  });
  it('rejects a broker without a port', () => {
    expect(() => brokersFromEnv({ KAFKA_BROKERS: 'localhost' })).toThrow(ConfigError);
  });
});

describe('worker environment variables', () => {
  test('defaults; empty means unset', () => {
    const unset = { logLevel: 'info', temporalLogLevel: 'warn', metricsPort: undefined, stateDir: undefined, maxHistoryEvents: undefined, exitWithParent: false };
    expect(readWorkerEnv({})).toMatchObject(unset);
    expect(readWorkerEnv({ KFT_METRICS_PORT: '', KFT_STATE_DIR: '', KFT_MAX_HISTORY_EVENTS: '', KFT_EXIT_WITH_PARENT: '' })).toMatchObject(unset);
    expect(readWorkerEnv({}).kafkaBrokers).toEqual(readEnv({}).kafkaBrokers);
  });

  test('values', () => {
    const env = readWorkerEnv({
      LOG_LEVEL: 'DEBUG',
      TEMPORAL_LOG_LEVEL: 'Info',
      KFT_METRICS_PORT: '0',
      KFT_STATE_DIR: '/state',
      KFT_MAX_HISTORY_EVENTS: '60',
    });
    expect(env).toMatchObject({ logLevel: 'debug', temporalLogLevel: 'info', metricsPort: 0, stateDir: '/state', maxHistoryEvents: 60 });
  });

  test('KFT_WORKFLOW_REPORT_EVERY_MS: unset or empty leaves the reports at persistEvery; else a positive integer', () => {
    expect(readWorkerEnv({}).workflowReportEveryMs).toBeUndefined();
    expect(readWorkerEnv({ KFT_WORKFLOW_REPORT_EVERY_MS: '' }).workflowReportEveryMs).toBeUndefined();
    expect(readWorkerEnv({ KFT_WORKFLOW_REPORT_EVERY_MS: '10000' }).workflowReportEveryMs).toBe(10_000);
    expect(() => readWorkerEnv({ KFT_WORKFLOW_REPORT_EVERY_MS: '-5' })).toThrow(/KFT_WORKFLOW_REPORT_EVERY_MS/);
  });

  test('KFT_STICKY_TIMEOUT_MS: 2 s unless set; else a positive integer', () => {
    expect(readWorkerEnv({}).stickyTimeoutMs).toBe(2_000);
    expect(readWorkerEnv({ KFT_STICKY_TIMEOUT_MS: '' }).stickyTimeoutMs).toBe(2_000);
    expect(readWorkerEnv({ KFT_STICKY_TIMEOUT_MS: '10000' }).stickyTimeoutMs).toBe(10_000);
    for (const bad of ['0', '-3', '1.5', '2s']) expect(() => readWorkerEnv({ KFT_STICKY_TIMEOUT_MS: bad })).toThrow(/KFT_STICKY_TIMEOUT_MS/);
  });

  test('KFT_STATE_CACHE_MAX_KEYS: unset or empty leaves the flow\'s stateCache; else a positive integer', () => {
    expect(readWorkerEnv({}).stateCacheMaxKeys).toBeUndefined();
    expect(readWorkerEnv({ KFT_STATE_CACHE_MAX_KEYS: '' }).stateCacheMaxKeys).toBeUndefined();
    expect(readWorkerEnv({ KFT_STATE_CACHE_MAX_KEYS: '1000000' }).stateCacheMaxKeys).toBe(1_000_000);
    for (const bad of ['0', '-3', '1.5', 'many']) expect(() => readWorkerEnv({ KFT_STATE_CACHE_MAX_KEYS: bad })).toThrow(/KFT_STATE_CACHE_MAX_KEYS/);
  });

  test('KFT_STATE_CACHE_MAX_BYTES: unset or empty leaves the flow\'s stateCache; else an integer >= 200 (one key)', () => {
    expect(readWorkerEnv({}).stateCacheMaxBytes).toBeUndefined();
    expect(readWorkerEnv({ KFT_STATE_CACHE_MAX_BYTES: '' }).stateCacheMaxBytes).toBeUndefined();
    expect(readWorkerEnv({ KFT_STATE_CACHE_MAX_BYTES: '1073741824' }).stateCacheMaxBytes).toBe(1 << 30);
    for (const bad of ['0', '199', '1.5', '1GiB']) expect(() => readWorkerEnv({ KFT_STATE_CACHE_MAX_BYTES: bad })).toThrow(/KFT_STATE_CACHE_MAX_BYTES/);
  });

  test('KAFKA_TRANSACTION_VERSION: auto unless set; 1 or 2; anything else names the variable', () => {
    expect(readWorkerEnv({}).transactionVersion).toBe('auto');
    expect(readWorkerEnv({ KAFKA_TRANSACTION_VERSION: 'auto' }).transactionVersion).toBe('auto');
    expect(readWorkerEnv({ KAFKA_TRANSACTION_VERSION: '1' }).transactionVersion).toBe(1);
    expect(readWorkerEnv({ KAFKA_TRANSACTION_VERSION: '2' }).transactionVersion).toBe(2);
    expect(() => readWorkerEnv({ KAFKA_TRANSACTION_VERSION: '3' })).toThrow(/KAFKA_TRANSACTION_VERSION.*must be auto, 1 or 2/);
  });

  test('KFT_REBALANCE: unset or empty leaves the flow\'s consumer.rebalance; else eager or cooperative', () => {
    expect(readWorkerEnv({}).rebalance).toBeUndefined();
    expect(readWorkerEnv({ KFT_REBALANCE: '' }).rebalance).toBeUndefined();
    expect(readWorkerEnv({ KFT_REBALANCE: 'eager' }).rebalance).toBe('eager');
    expect(readWorkerEnv({ KFT_REBALANCE: 'cooperative' }).rebalance).toBe('cooperative');
    expect(() => readWorkerEnv({ KFT_REBALANCE: 'sticky' })).toThrow(/KFT_REBALANCE/);
  });

  test('KFT_STANDBY_REPLICAS: unset or empty leaves the flow\'s standbyReplicas; else an integer >= 0', () => {
    expect(readWorkerEnv({}).standbyReplicas).toBeUndefined();
    expect(readWorkerEnv({ KFT_STANDBY_REPLICAS: '' }).standbyReplicas).toBeUndefined();
    expect(readWorkerEnv({ KFT_STANDBY_REPLICAS: '0' }).standbyReplicas).toBe(0);
    expect(readWorkerEnv({ KFT_STANDBY_REPLICAS: '2' }).standbyReplicas).toBe(2);
    for (const bad of ['-1', '0.5', 'one']) expect(() => readWorkerEnv({ KFT_STANDBY_REPLICAS: bad })).toThrow(/KFT_STANDBY_REPLICAS/);
  });

  test('KFT_RESTORE_REPORT_EVERY_MS: unset leaves the default (10 s, the runtime default); else a positive integer', () => {
    expect(readWorkerEnv({}).restoreReportEveryMs).toBeUndefined();
    expect(readWorkerEnv({ KFT_RESTORE_REPORT_EVERY_MS: '250' }).restoreReportEveryMs).toBe(250);
    expect(() => readWorkerEnv({ KFT_RESTORE_REPORT_EVERY_MS: '0' })).toThrow(/KFT_RESTORE_REPORT_EVERY_MS/);
  });

  test('KFT_EXIT_WITH_PARENT: 1 on, 0 off, unset on under npm only', () => {
    expect(readWorkerEnv({ npm_execpath: '/usr/lib/npm-cli.js' }).exitWithParent).toBe(true);
    expect(readWorkerEnv({ npm_execpath: '/usr/lib/npm-cli.js', KFT_EXIT_WITH_PARENT: '0' }).exitWithParent).toBe(false);
    expect(readWorkerEnv({ KFT_EXIT_WITH_PARENT: '1' }).exitWithParent).toBe(true);
  });

  test('KFT_FOLD_AT_JOIN: on unless 0', () => {
    expect(readWorkerEnv({}).foldAtJoin).toBe(true);
    expect(readWorkerEnv({ KFT_FOLD_AT_JOIN: '' }).foldAtJoin).toBe(true);
    expect(readWorkerEnv({ KFT_FOLD_AT_JOIN: '0' }).foldAtJoin).toBe(false);
    expect(() => readWorkerEnv({ KFT_FOLD_AT_JOIN: 'yes' })).toThrow(/KFT_FOLD_AT_JOIN.*must be 1 \(on\) or 0 \(off\)/);
  });

  test('KFT_WORKFLOW_BUNDLE_DIR: a directory, off, or under KFT_CACHE_DIR', () => {
    expect(readWorkerEnv({}).workflowBundleDir).toBe(path.resolve(__dirname, '../../../.cache/workflow-bundle'));
    expect(readWorkerEnv({ KFT_CACHE_DIR: '/tmp/c' }).workflowBundleDir).toBe('/tmp/c/workflow-bundle');
    expect(readWorkerEnv({ KFT_WORKFLOW_BUNDLE_DIR: '/var/cache/kft' }).workflowBundleDir).toBe('/var/cache/kft');
    expect(readWorkerEnv({ KFT_WORKFLOW_BUNDLE_DIR: 'rel' }).workflowBundleDir).toBe(path.resolve('rel'));
    expect(readWorkerEnv({ KFT_WORKFLOW_BUNDLE_DIR: '' }).workflowBundleDir).toBe(path.resolve(__dirname, '../../../.cache/workflow-bundle'));
    expect(readWorkerEnv({ KFT_WORKFLOW_BUNDLE_DIR: 'off' }).workflowBundleDir).toBeUndefined();
  });

  test.each([
    ['LOG_LEVEL', 'loud', /LOG_LEVEL="loud": must be one of trace, debug, info, warn, error, fatal, silent/],
    ['TEMPORAL_LOG_LEVEL', 'verbose', /TEMPORAL_LOG_LEVEL="verbose": must be one of/],
    ['KFT_METRICS_PORT', 'abc', /KFT_METRICS_PORT="abc": must be a port number 0..65535 \(0: any free port\)/],
    ['KFT_METRICS_PORT', '70000', /KFT_METRICS_PORT="70000": must be a port number/],
    ['KFT_MAX_HISTORY_EVENTS', '-5', /KFT_MAX_HISTORY_EVENTS="-5": must be > 0/],
    ['KFT_EXIT_WITH_PARENT', 'yes', /KFT_EXIT_WITH_PARENT="yes": must be 1 \(on\) or 0 \(off\)/],
  ])('%s=%j is a one-line ConfigError naming the variable', (name, value, message) => {
    expect(() => readWorkerEnv({ [name]: value })).toThrow(ConfigError);
    expect(() => readWorkerEnv({ [name]: value })).toThrow(message);
  });
});

describe('infra settings', () => {
  test('ports follow the client addresses; data under the cache', () => {
    const s = readInfraSettings({ KAFKA_BROKERS: '127.0.0.1:19092', KFT_CACHE_DIR: '/tmp/c', TEMPORAL_UI_PORT: '18233' });
    expect(s.kafka).toMatchObject({ port: 19092, controllerPort: 19093 });
    expect(s.temporal.uiPort).toBe(18233);
    expect(s.dataDir).toBe('/tmp/c/data');
    expect(s.servers).toEqual(['kafka', 'temporal', 'cassandra']);
  });

  test('a remote server is not managed', () => {
    expect(readInfraSettings({ CASSANDRA_CONTACT_POINTS: 'db.example:9042' }).servers).toEqual(['kafka', 'temporal']);
  });

  test.each([
    [{ TEMPORAL_UI_PORT: 'x' }, /TEMPORAL_UI_PORT="x": is not a number/],
    [{ KFT_INFRA_SERVERS: 'kafka,zookeeper' }, /KFT_INFRA_SERVERS=.*must be one of kafka, temporal, cassandra/],
    [{ KFT_INFRA_TIMEOUT_SECONDS: '-1' }, /KFT_INFRA_TIMEOUT_SECONDS="-1": must be > 0/],
    [{ KFT_INFRA_SERVERS: 'kafka', KAFKA_BROKERS: 'kafka.example:9092' }, /not on this machine/],
  ])('%j is a ConfigError', (env, message) => {
    expect(() => readInfraSettings(env)).toThrow(ConfigError);
    expect(() => readInfraSettings(env)).toThrow(message);
  });
});
