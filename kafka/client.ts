/**
 * Client construction for the whole Kafka port. Everything else in `kafka/` receives a
 * `KafkaClient` from here; nothing outside `kafka/` imports kafkajs. The brokers come from the
 * caller (`KAFKA_BROKERS` is parsed in config/env: `brokersFromEnv`).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Kafka, type logCreator, logLevel } from 'kafkajs';
import type { KafkaSecurity } from '../config/security';
import { type KafkaConnectionSecurity, kafkaConnectionSecurity } from './client-security';
import type { Logger } from '../core/logger';
import { kafkajsConsoleLogCreator } from './internals';

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
 * kafkajs logs every CreateTopics response that carries an error as an ERROR ("Topic creation
 * errors", no topic, no reason) before anyone can tell what it was — TOPIC_ALREADY_EXISTS
 * included, which its admin then returns as a success: two workers of a new flow starting at once
 * both create its snapshot and output topics, and one of them printed that error every time. Inside
 * `holdingTopicCreationErrors`, that entry is held back until the outcome is known.
 */
const heldTopicCreationErrors = new AsyncLocalStorage<Array<() => void>>();

function isTopicCreationError(entry: KafkajsEntry): boolean {
  const { message, error } = entry.log as { message?: unknown; error?: unknown };
  return entry.level === logLevel.ERROR && error === 'Topic creation errors' && typeof message === 'string' && message.startsWith('Response CreateTopics');
}

/**
 * Runs `create` (a kafkajs `createTopics`) with kafkajs's error entry of its CreateTopics
 * response held: dropped when `create` succeeds (kafkajs's admin resolves when every topic it
 * refused already existed) or fails with an error `isRace` calls a racing creator's; written as
 * kafkajs wrote it, at error level, for any other failure (authorization, invalid config, …),
 * which is then raised.
 */
export async function holdingTopicCreationErrors<T>(create: () => Promise<T>, isRace: (err: unknown) => boolean): Promise<T> {
  const held: Array<() => void> = [];
  try {
    return await heldTopicCreationErrors.run(held, create);
  } catch (err) {
    if (!isRace(err)) for (const write of held) write();
    throw err;
  }
}

/** kafkajs's entries (minus the misleading and the routine ones, and a held CreateTopics error) to `sink`: kafkajs's console, or a logger. */
function projectLogCreator(logger: Logger | undefined): logCreator {
  return (level) => {
    const log = logger ? toLogger(logger) : kafkajsConsoleLogCreator(level);
    return (entry) => {
      if (MISLEADING.has(entry.log.message)) return;
      if (entry.level !== logLevel.DEBUG && isRoutine(entry.log)) return;
      const held = isTopicCreationError(entry) ? heldTopicCreationErrors.getStore() : undefined;
      if (held) held.push(() => log(entry));
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

export function createKafkaClient(options: KafkaClientOptions): KafkaClient {
  const level = LOG_LEVELS[options.logLevel ?? 'warn'];
  const connection = kafkaConnectionSecurity(options.security);
  const logCreator = projectLogCreator(options.logger);
  const kafka = new Kafka({ brokers: options.brokers, clientId: options.clientId, logLevel: level, logCreator, ...connection });
  return { brokers: options.brokers, clientId: options.clientId, kafka, logLevel: level, logCreator, connection };
}
