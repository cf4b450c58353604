/**
 * The base of every error this project raises on purpose. Each has a stable `code` that the
 * README's error table documents, and a message that says what to do.
 */
export class KafkaFlowError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A configuration value (environment variable, flow option) is invalid. */
export class ConfigError extends KafkaFlowError {
  readonly exitCode = 2;
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIG', message, options);
  }
}

/**
 * A component of ours used after it was closed: a worker stopping while an activity still reaches
 * for it. The activity fails and the partition's next owner (or this one, restarted) carries on.
 */
export class ClosedError extends KafkaFlowError {
  constructor(what: string) {
    super('CLOSED', `${what} is closed: the worker is stopping (the partition's next owner carries on)`);
  }
}

/**
 * An invariant of ours or of the patched Kafka client does not hold (a bug, or the kafkajs patch
 * not applied). Its message names what, never a record's key or value, so it is shown in full.
 */
export class InternalError extends KafkaFlowError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INTERNAL', message, options);
  }
}

/** One line for errors we raise on purpose; the stack for anything unexpected. */
export function formatFatal(err: unknown): string {
  if (err instanceof KafkaFlowError) return `kafka-flow-temporal: ${err.name}: ${err.message}`;
  if (err instanceof Error) return err.stack ?? String(err);
  return String(err);
}
