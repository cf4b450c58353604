/**
 * Client construction for the whole Kafka port. Everything else in `kafka/` receives a
 * `KafkaClient` from here; nothing outside `kafka/` imports kafkajs. The brokers come from the
 * caller (`KAFKA_BROKERS` is parsed in config/env: `brokersFromEnv`).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Kafka, type KafkaConfig, type logCreator, logLevel } from 'kafkajs';
import type { KafkaSecurity } from '../config/security';
import { type KafkaConnectionSecurity, kafkaConnectionSecurity } from './client-security';
import type { Logger } from '../core/logger';
import { kafkajsConsoleLogCreator } from './internals';
import { registerKafkajsExtensions } from './protocol/extensions';

export interface KafkaClientOptions {
  brokers: string[];
  clientId: string;
  /** kafkajs log level; default WARN (its INFO is chatty about every join and transaction). */
  logLevel?: 'nothing' | 'error' | 'warn' | 'info' | 'debug';
  /** TLS and SASL (KAFKA_SSL_* / KAFKA_SASL_*, config/security `readKafkaSecurity`); default plaintext. */
  security?: KafkaSecurity;
  /**
   * Where kafkajs's log entries go: this logger (a worker's pino logger, so its stderr has one log
   * format), each entry with `component: 'kafkajs'` and kafkajs's fields. Default: kafkajs's own
   * console lines.
   */
  logger?: Logger;
}

const LOG_LEVELS = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
} as const;

/** The connection settings every client of this process shares. */
export interface KafkaClient {
  readonly brokers: string[];
  readonly clientId: string;
  readonly kafka: Kafka;
  readonly logLevel: number;
  /** kafkajs's `ssl` / `sasl` options of this client, for the group-less readers built on it. */
  readonly connection: KafkaConnectionSecurity;
  /** The log creator of its kafkajs clients (the group-less readers' clusters use it too). */
  readonly logCreator: logCreator;
}

/**
 * Messages kafkajs logs that are wrong for this project. Our partition producers bound their
 * retries on purpose (a failed transaction is aborted and its producer discarded, so a give-up
 * cannot leave a sequence gap behind), and kafkajs warns about it once per producer.
 */
const MISLEADING = new Set(['Limiting retries for the idempotent producer may invalidate EoS guarantees']);

/**
 * CONCURRENT_TRANSACTIONS is the coordinator's routine answer while it still completes the
 * previous transaction of the id (back-to-back group commits meet it every time); kafkajs retries
 * it and logs every attempt as an ERROR. Kept at debug level only; a give-up still surfaces as
 * the error it causes.
 */
const ROUTINE_ERRORS = new Set([
  'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing',
  // REBALANCE_IN_PROGRESS on a heartbeat is how a member learns of every rebalance; kafkajs logs it
  // as an ERROR (and the rejoin as a WARN). Our own "partitions assigned" line says what happened.
  'The group is rebalancing, so a rejoin is needed',
]);

function isRoutine(log: { message?: string; error?: unknown }): boolean {
  for (const text of ROUTINE_ERRORS) {
    if (log.error === text || (typeof log.message === 'string' && log.message.endsWith(text))) return true;
  }
  return false;
}

type KafkajsEntry = Parameters<ReturnType<logCreator>>[0];

/**
 * kafkajs logs every response that carries an error as an ERROR before anyone can tell what it
 * meant: TOPIC_ALREADY_EXISTS from a racing creator (two workers of a new flow starting at once
 * both create its snapshot and output topics; kafkajs's admin then returns it as a success), or
 * UNKNOWN_TOPIC_OR_PARTITION while a topic just created propagates. Inside `holdingKafkajsErrors`,
 * the entries its `matches` picks are held back until the outcome is known.
 */
interface Hold {
  matches: (log: { message?: unknown; error?: unknown }) => boolean;
  entries: Array<() => void>;
}
const holds = new AsyncLocalStorage<Hold>();

/**
 * Runs `run` (kafkajs calls) with the error-level kafkajs entries `matches` picks held: dropped
 * when `run` succeeds or fails with an error `expected` accepts (the caller's normal outcome: a
 * topic a racing creator made, a metadata answer it retries); written as kafkajs wrote them, at
 * error level, for any other failure (authorization, invalid config, …), which is then raised.
 */
export async function holdingKafkajsErrors<T>(
  matches: Hold['matches'],
  run: () => Promise<T>,
  expected: (err: unknown) => boolean,
): Promise<T> {
  const hold: Hold = { matches, entries: [] };
  try {
    return await holds.run(hold, run);
  } catch (err) {
    if (!expected(err)) for (const write of hold.entries) write();
    throw err;
  }
}

/** kafkajs's entries (minus the misleading and the routine ones, and those held) to `sink`: kafkajs's console, or a logger. */
function projectLogCreator(logger: Logger | undefined): logCreator {
  return (level) => {
    const log = logger ? toLogger(logger) : kafkajsConsoleLogCreator(level);
    return (entry) => {
      if (MISLEADING.has(entry.log.message)) return;
      if (entry.level !== logLevel.DEBUG && isRoutine(entry.log)) return;
      const hold = entry.level === logLevel.ERROR ? holds.getStore() : undefined;
      if (hold?.matches(entry.log)) hold.entries.push(() => log(entry));
      else log(entry);
    };
  };
}

/** One kafkajs entry as one line of `logger`: its message, its namespace and its fields (an error's text and stack included). */
function toLogger(logger: Logger): (entry: KafkajsEntry) => void {
  return ({ namespace, level, log }) => {
    const { message, timestamp: _timestamp, logger: _kafkajs, ...fields } = log;
    const write = level <= logLevel.ERROR ? logger.error : level === logLevel.WARN ? logger.warn : level === logLevel.INFO ? logger.info : logger.debug;
    write.call(logger, { component: 'kafkajs', namespace, ...fields }, message);
  };
}

/**
 * A kafkajs client, with the kafkajs patch's hooks into our protocol code (kafka/protocol/)
 * registered: every kafkajs client of the project is made here (the port's through
 * `createKafkaClient`; the infrastructure's, benchmarks' and tests' own directly).
 */
export function newKafka(config: KafkaConfig): Kafka {
  registerKafkajsExtensions();
  return new Kafka(config);
}

export function createKafkaClient(options: KafkaClientOptions): KafkaClient {
  const level = LOG_LEVELS[options.logLevel ?? 'warn'];
  const connection = kafkaConnectionSecurity(options.security);
  const logCreator = projectLogCreator(options.logger);
  const kafka = newKafka({ brokers: options.brokers, clientId: options.clientId, logLevel: level, logCreator, ...connection });
  return { brokers: options.brokers, clientId: options.clientId, kafka, logLevel: level, logCreator, connection };
}
