import path from 'node:path';
import { z } from 'zod';
import { cacheDir as cacheDirOf, type Env, envValue, formatHostPort, isLoopback, portNumber, positiveInt, readEnv } from '../config/env';
import { ConfigError } from '../config/errors';

export const SERVER_NAMES = ['kafka', 'temporal', 'cassandra'] as const;
/**
 * Secured servers for the tests of production connectivity, started only when asked for
 * (`KFT_INFRA_SERVERS=…,temporal-tls,cassandra-secure`, or the secured tests' setup): a TLS
 * (mTLS / API key) endpoint in front of the Temporal dev server, and a second Cassandra node with
 * PasswordAuthenticator and client encryption. Kafka's secured listeners are on the default broker.
 */
export const OPTIONAL_SERVER_NAMES = ['temporal-tls', 'cassandra-secure'] as const;
export type ServerName = (typeof SERVER_NAMES)[number] | (typeof OPTIONAL_SERVER_NAMES)[number];
const ALL_SERVER_NAMES = [...SERVER_NAMES, ...OPTIONAL_SERVER_NAMES] as const;

/** Pinned server versions; docker-compose.yml must agree (a unit test checks it). */
export const VERSIONS = {
  kafka: '4.3.1',
  log4j: '2.24.3',
  temporalCli: '1.9.1',
  cassandra: '5.0.6',
} as const;

export interface InfraSettings {
  root: string;
  cacheDir: string;
  dataDir: string;
  runDir: string;
  logDir: string;
  readyTimeoutMs: number;
  /** Servers this command manages: those whose address is on this machine. */
  servers: ServerName[];
  env: Env;
  kafka: { host: string; port: number; controllerPort: number; heapMb: number; saslSslPort: number; sslPort: number };
  temporal: { host: string; port: number; uiPort: number; namespace: string };
  cassandra: { host: string; port: number; storagePort: number; heapMb: number };
  /** The TLS endpoint in front of Temporal (`KFT_TEMPORAL_TLS_PORT`, default Temporal port + 3). */
  temporalTls: { host: string; port: number };
  /** The secured Cassandra node (`KFT_CASSANDRA_SECURE_PORT`, default Cassandra port + 1; internode storage port + 1). */
  cassandraSecure: { host: string; port: number; storagePort: number; heapMb: number };
}

const serverList = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
  .pipe(z.array(z.enum(ALL_SERVER_NAMES, { message: `each must be one of ${ALL_SERVER_NAMES.join(', ')}` })).min(1));

export function readInfraSettings(env: NodeJS.ProcessEnv = process.env): InfraSettings {
  const root = path.resolve(__dirname, '..');
  const e = readEnv(env);
  const cacheDir = cacheDirOf(env);
  const dataDir = path.resolve(env.KFT_DATA_DIR || path.join(cacheDir, 'data'));
  const kafka = e.kafkaBrokers[0]!;
  const cassandra = e.cassandraContactPoints[0]!;
  const requested = envValue('KFT_INFRA_SERVERS', serverList, SERVER_NAMES.join(','), env);
  const local: Record<ServerName, boolean> = {
    kafka: isLoopback(kafka.host),
    temporal: isLoopback(e.temporalAddress.host),
    cassandra: isLoopback(cassandra.host),
    'temporal-tls': isLoopback(e.temporalAddress.host),
    'cassandra-secure': isLoopback(cassandra.host),
  };
  const remote = requested.filter((s) => !local[s]);
  if (remote.length > 0 && env.KFT_INFRA_SERVERS) {
    const where = {
      kafka: formatHostPort(kafka),
      temporal: formatHostPort(e.temporalAddress),
      cassandra: formatHostPort(cassandra),
      'temporal-tls': formatHostPort(e.temporalAddress),
      'cassandra-secure': formatHostPort(cassandra),
    };
    throw new ConfigError(
      `KFT_INFRA_SERVERS names ${remote.map((s) => `${s} (${where[s]})`).join(', ')}, which is not on this machine; infra manages only local servers`,
    );
  }
  const kafkaControllerPort = envValue('KFT_KAFKA_CONTROLLER_PORT', portNumber, String(kafka.port + 1), env);
  return {
    root,
    cacheDir,
    dataDir,
    runDir: path.join(dataDir, 'run'),
    logDir: path.join(dataDir, 'logs'),
    readyTimeoutMs: envValue('KFT_INFRA_TIMEOUT_SECONDS', positiveInt, '150', env) * 1000,
    servers: requested.filter((s) => local[s]),
    env: e,
    kafka: {
      host: kafka.host,
      port: kafka.port,
      controllerPort: kafkaControllerPort,
      heapMb: envValue('KFT_KAFKA_HEAP_MB', positiveInt, '512', env),
      // The secured listeners of the same broker (infra/servers/kafka-secure.ts).
      saslSslPort: envValue('KFT_KAFKA_SASL_SSL_PORT', portNumber, String(kafka.port + 2), env),
      sslPort: envValue('KFT_KAFKA_SSL_PORT', portNumber, String(kafka.port + 3), env),
    },
    temporal: {
      host: e.temporalAddress.host,
      port: e.temporalAddress.port,
      uiPort: envValue('TEMPORAL_UI_PORT', portNumber, '8233', env),
      namespace: e.temporalNamespace,
    },
    cassandra: {
      host: cassandra.host,
      port: cassandra.port,
      storagePort: envValue('KFT_CASSANDRA_STORAGE_PORT', portNumber, '7000', env),
      heapMb: envValue('KFT_CASSANDRA_HEAP_MB', positiveInt, '1024', env),
    },
    temporalTls: {
      host: e.temporalAddress.host,
      port: envValue('KFT_TEMPORAL_TLS_PORT', portNumber, String(e.temporalAddress.port + 3), env),
    },
    cassandraSecure: {
      host: cassandra.host,
      port: envValue('KFT_CASSANDRA_SECURE_PORT', portNumber, String(cassandra.port + 1), env),
      storagePort: envValue('KFT_CASSANDRA_SECURE_STORAGE_PORT', portNumber, String(envValue('KFT_CASSANDRA_STORAGE_PORT', portNumber, '7000', env) + 1), env),
      heapMb: envValue('KFT_CASSANDRA_SECURE_HEAP_MB', positiveInt, '512', env),
    },
  };
}
