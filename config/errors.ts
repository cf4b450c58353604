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

/** One line for errors we raise on purpose; the stack for anything unexpected. */
export function formatFatal(err: unknown): string {
  if (err instanceof KafkaFlowError) return `kafka-flow-temporal: ${err.name}: ${err.message}`;
  if (err instanceof Error) return err.stack ?? String(err);
  return String(err);
}
