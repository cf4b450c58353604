import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors';
import { readSecurity, type Security } from './security';
import { readTracingEnv, type TracingConfig } from './tracing';

/**
 * The environment variables of the public surface (README, *Configuration*). Every value is validated here so
 * that a typo fails at start with one line naming the variable, not deep inside a client library.
 */
export interface HostPort {
  host: string;
  port: number;
}

const hostPort = z.string().transform((raw, ctx) => {
  const m = /^\[?([^\]\s]*?)\]?:(\d+)$/.exec(raw.trim());
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) {
    ctx.addIssue({ code: 'custom', message: `'${raw}' is not host:port (e.g. 127.0.0.1:9092)` });
    return z.NEVER;
  }
  return { host: m[1], port } satisfies HostPort;
});

const hostPortList = z
  .string()
  .transform((raw) => raw.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
  .pipe(z.array(hostPort).min(1, 'must list at least one host:port'));

export const portNumber = z.coerce
  .number({ message: 'is not a number' })
  .int('is not an integer')
  .min(1, 'must be a port number 1..65535')
  .max(65535, 'must be a port number 1..65535');

/** Parses one environment variable with a zod schema; a bad value is a ConfigError naming it. */
export function envValue<T>(name: string, schema: z.ZodType<T>, fallback: string, env: NodeJS.ProcessEnv = process.env): T {
  const raw = env[name] ?? fallback;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const why = parsed.error.issues.map((i) => i.message).join('; ');
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: ${why}`);
  }
  return parsed.data;
}

export interface Env {
  kafkaBrokers: HostPort[];
  temporalAddress: HostPort;
  temporalNamespace: string;
  cassandraContactPoints: HostPort[];
}

export const defaults = {
  KAFKA_BROKERS: '127.0.0.1:9092',
  TEMPORAL_ADDRESS: '127.0.0.1:7233',
  TEMPORAL_NAMESPACE: 'default',
  CASSANDRA_CONTACT_POINTS: '127.0.0.1:9042',
} as const;

export function readEnv(env: NodeJS.ProcessEnv = process.env): Env {
  return {
    kafkaBrokers: envValue('KAFKA_BROKERS', hostPortList, defaults.KAFKA_BROKERS, env),
    temporalAddress: envValue('TEMPORAL_ADDRESS', hostPort, defaults.TEMPORAL_ADDRESS, env),
    temporalNamespace: envValue(
      'TEMPORAL_NAMESPACE',
      z.string().regex(/^[A-Za-z0-9._-]+$/, 'must be a Temporal namespace name'),
      defaults.TEMPORAL_NAMESPACE,
      env,
    ),
    cassandraContactPoints: envValue('CASSANDRA_CONTACT_POINTS', hostPortList, defaults.CASSANDRA_CONTACT_POINTS, env),
  };
}

export const formatHostPort = (a: HostPort): string => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`);

export const isLoopback = (host: string): boolean =>
  host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** `KAFKA_BROKERS` as kafkajs takes it (`host:port` strings). */
export function brokersFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  return readEnv(env).kafkaBrokers.map(formatHostPort);
}

/** pino's level names; a level is matched case-insensitively (pino lowercases the root level too). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

const logLevel = z
  .string()
  .transform((s) => s.toLowerCase())
  .pipe(z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }));

/** An optional variable: unset or empty means "not set", as the worker has always read them. */
const optional = <T>(schema: z.ZodType<T>) => z.preprocess((v) => (v === '' ? undefined : v), schema.optional());

const metricsPort = z.coerce
  .number({ message: 'must be a port number 0..65535 (0: any free port)' })
  .int('must be a port number 0..65535 (0: any free port)')
  .min(0, 'must be a port number 0..65535 (0: any free port)')
  .max(65535, 'must be a port number 0..65535 (0: any free port)');

/** A bind address: an IPv4/IPv6 literal or a host name (`0.0.0.0`: every interface). */
export const metricsHost = z
  .string()
  .transform((s) => s.trim())
  .pipe(z.string().regex(/^(\[?[0-9a-fA-F:.]+\]?|[A-Za-z0-9.-]+)$/, 'must be an address to bind, e.g. 127.0.0.1 or 0.0.0.0'))
  .transform((s) => s.replace(/^\[(.*)\]$/, '$1'));

export const positiveInt = z.coerce.number({ message: 'is not a number' }).int('is not an integer').positive('must be > 0');
export const nonNegativeInt = z.coerce.number({ message: 'is not a number' }).int('is not an integer').nonnegative('must be >= 0');

const onOff = z.enum(['0', '1'], { message: "must be 1 (on) or 0 (off); unset: on under npm" });
const onOffDefaultOn = z.enum(['0', '1'], { message: 'must be 1 (on) or 0 (off); unset: on' });
const rebalanceProtocol = z.enum(['eager', 'cooperative'], { message: 'must be eager or cooperative' });
const transactionVersion = z
  .enum(['auto', '1', '2'], { message: 'must be auto, 1 or 2' })
  .transform((v): 'auto' | 1 | 2 => (v === 'auto' ? 'auto' : v === '1' ? 1 : 2));

/**
 * `KFT_CACHE_DIR`: this project's cache (downloaded servers, workflow bundles), git-ignored;
 * `.cache` in the package's root unless set.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.KFT_CACHE_DIR || path.join(__dirname, '..', '.cache'));
}

/** `KFT_WORKFLOW_BUNDLE_DIR`: a directory, or `off`; unset: `$KFT_CACHE_DIR/workflow-bundle`. */
function workflowBundleDir(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.KFT_WORKFLOW_BUNDLE_DIR?.trim();
  if (raw === 'off') return undefined;
  return raw ? path.resolve(raw) : path.join(cacheDir(env), 'workflow-bundle');
}

/** The worker process's own variables (the `worker` command), on top of the connection variables. */
export interface WorkerEnv extends Env {
  /** `LOG_LEVEL`: the worker's JSON logs on stderr. */
  logLevel: LogLevelName;
  /** `TEMPORAL_LOG_LEVEL`: the Temporal SDK's logs through the same logger. */
  temporalLogLevel: LogLevelName;
  /** `KFT_METRICS_PORT`: serve `/metrics` here (0: any free port); undefined: off. */
  metricsPort: number | undefined;
  /** `KFT_METRICS_HOST`: the address `/metrics` binds (default 127.0.0.1: this machine only). */
  metricsHost: string;
  /** TLS, SASL, API keys and passwords of the three servers (config/security.ts). */
  security: Security;
  /** `KFT_STATE_DIR`: local state of the worker's transactional Kafka flows; undefined: off. */
  stateDir: string | undefined;
  /** `KFT_STATE_CACHE_MAX_KEYS`: the worker's bounded state cache (overrides the flow's stateCache.maxKeys); undefined: the flow's. */
  stateCacheMaxKeys: number | undefined;
  /** `KFT_STATE_CACHE_MAX_BYTES`: the same bound in bytes (overrides the flow's stateCache.maxBytes); undefined: the flow's. */
  stateCacheMaxBytes: number | undefined;
  /** `KFT_STANDBY_REPLICAS`: standby copies of each partition (overrides the flow's standbyReplicas); undefined: the flow's. */
  standbyReplicas: number | undefined;
  /** `KFT_REBALANCE` (`eager` or `cooperative`): the group's rebalance protocol (overrides the flow's consumer.rebalance); undefined: the flow's. */
  rebalance: 'eager' | 'cooperative' | undefined;
  /** `KFT_MAX_HISTORY_EVENTS`: partition workflows continue as new past this; undefined: the workflow's default. */
  maxHistoryEvents: number | undefined;
  /** `KFT_EXIT_WITH_PARENT` (1 on, 0 off; unset: on when run by npm, i.e. `npm_execpath` is set). */
  exitWithParent: boolean;
  /** `KFT_REASSERT_AFTER_MS`: a partition held here but not folding for this long is signalled to its workflow again. */
  reassertAfterMs: number;
  /** `KFT_STICKY_TIMEOUT_MS`: a partition workflow's task waits this long for the worker that has it cached before another takes it (replaying its history); default 2 s. */
  stickyTimeoutMs: number;
  /** `KFT_BLOCKED_EXIT_MS`: a worker whose main thread has not run for this long kills itself (0: never). */
  blockedExitMs: number;
  /** `KFT_FOLD_AT_JOIN` (1 on, the default; 0 off): a partition recovered before its workflow's activity came folds at once. */
  foldAtJoin: boolean;
  /** `KAFKA_TRANSACTION_VERSION` (auto, the default: 2 where the cluster speaks it; 1; 2): the snapshot transactions' protocol (KIP-890 part 2 is 2). */
  transactionVersion: 'auto' | 1 | 2;
  /** `KFT_WORKFLOW_REPORT_EVERY_MS`: partition workflows hear of the persists at most this often; undefined: every persistEvery. */
  workflowReportEveryMs: number | undefined;
  /** `KFT_RESTORE_REPORT_EVERY_MS`: a long recovery tells its partition workflow how far it is this often (the first after as long); undefined: 10 s. */
  restoreReportEveryMs: number | undefined;
  /** `KFT_WORKFLOW_BUNDLE_DIR`: where the workflow bundle is cached; undefined (`off`): bundled at every start. */
  workflowBundleDir: string | undefined;
  /** `OTEL_*`: where the worker's OpenTelemetry spans go (config/tracing.ts); undefined: tracing off. */
  tracing: TracingConfig | undefined;
}

export function readWorkerEnv(env: NodeJS.ProcessEnv = process.env): WorkerEnv {
  const exitWithParent = envValue('KFT_EXIT_WITH_PARENT', optional(onOff), '', env);
  return {
    ...readEnv(env),
    logLevel: envValue('LOG_LEVEL', logLevel, 'info', env),
    temporalLogLevel: envValue('TEMPORAL_LOG_LEVEL', logLevel, 'warn', env),
    metricsPort: envValue('KFT_METRICS_PORT', optional(metricsPort), '', env),
    metricsHost: envValue('KFT_METRICS_HOST', optional(metricsHost), '', env) ?? '127.0.0.1',
    security: readSecurity(env),
    stateDir: env.KFT_STATE_DIR || undefined,
    stateCacheMaxKeys: envValue('KFT_STATE_CACHE_MAX_KEYS', optional(positiveInt), '', env),
    stateCacheMaxBytes: envValue('KFT_STATE_CACHE_MAX_BYTES', optional(positiveInt.min(200, 'must be at least 200 (one key)')), '', env),
    standbyReplicas: envValue('KFT_STANDBY_REPLICAS', optional(nonNegativeInt), '', env),
    rebalance: envValue('KFT_REBALANCE', optional(rebalanceProtocol), '', env),
    maxHistoryEvents: envValue('KFT_MAX_HISTORY_EVENTS', optional(positiveInt), '', env),
    exitWithParent: exitWithParent === undefined ? Boolean(env.npm_execpath) : exitWithParent === '1',
    reassertAfterMs: envValue('KFT_REASSERT_AFTER_MS', positiveInt, '30000', env),
    stickyTimeoutMs: envValue('KFT_STICKY_TIMEOUT_MS', optional(positiveInt), '', env) ?? 2_000,
    blockedExitMs: envValue('KFT_BLOCKED_EXIT_MS', nonNegativeInt, '60000', env),
    foldAtJoin: envValue('KFT_FOLD_AT_JOIN', optional(onOffDefaultOn), '', env) !== '0',
    transactionVersion: envValue('KAFKA_TRANSACTION_VERSION', transactionVersion, 'auto', env),
    workflowReportEveryMs: envValue('KFT_WORKFLOW_REPORT_EVERY_MS', optional(positiveInt), '', env),
    restoreReportEveryMs: envValue('KFT_RESTORE_REPORT_EVERY_MS', optional(positiveInt), '', env),
    workflowBundleDir: workflowBundleDir(env),
    tracing: readTracingEnv(env),
  };
}
