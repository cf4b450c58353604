import path from 'node:path';
import { z } from 'zod';
import { type Env, envValue, formatHostPort, isLoopback, portNumber, readEnv } from '../config/env';
import { ConfigError } from '../config/errors';

export const SERVER_NAMES = ['kafka', 'temporal', 'cassandra'] as const;
export type ServerName = (typeof SERVER_NAMES)[number];

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
  kafka: { host: string; port: number; controllerPort: number; heapMb: number };
  temporal: { host: string; port: number; uiPort: number; namespace: string };
  cassandra: { host: string; port: number; storagePort: number; heapMb: number };
}

const serverList = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
  .pipe(z.array(z.enum(SERVER_NAMES, { message: `each must be one of ${SERVER_NAMES.join(', ')}` })).min(1));

const positiveInt = z.coerce.number({ message: 'is not a number' }).int('is not an integer').positive('must be > 0');

export function readInfraSettings(env: NodeJS.ProcessEnv = process.env): InfraSettings {
  const root = path.resolve(__dirname, '..');
  const e = readEnv(env);
  const cacheDir = path.resolve(env.KFT_CACHE_DIR || path.join(root, '.cache'));
  const dataDir = path.resolve(env.KFT_DATA_DIR || path.join(cacheDir, 'data'));
  const kafka = e.kafkaBrokers[0]!;
  const cassandra = e.cassandraContactPoints[0]!;
  const requested = envValue('KFT_INFRA_SERVERS', serverList, SERVER_NAMES.join(','), env);
  const local: Record<ServerName, boolean> = {
    kafka: isLoopback(kafka.host),
    temporal: isLoopback(e.temporalAddress.host),
    cassandra: isLoopback(cassandra.host),
  };
  const remote = requested.filter((s) => !local[s]);
  if (remote.length > 0 && env.KFT_INFRA_SERVERS) {
    const where = { kafka: formatHostPort(kafka), temporal: formatHostPort(e.temporalAddress), cassandra: formatHostPort(cassandra) };
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
  };
}
