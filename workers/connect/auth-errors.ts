import { KafkaFlowError } from '../../config/errors';

// The worker's "the server refused us" errors, in a module light enough for the package root to re-export.

/** The innermost message of an error chain, on one line. */
function innermost(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  const text = e instanceof Error ? `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}` : String(e);
  return text.split('\n')[0]!.slice(0, 300);
}

/**
 * The Kafka brokers refused this client: SASL credentials they do not accept, a client certificate
 * they do not trust, a server certificate this client does not trust, or a security protocol that
 * does not match the listener (TLS to a plaintext port or the other way round). Not an outage: the
 * worker exits 1 with this one line naming the variables to check.
 */
export class KafkaAuthenticationError extends KafkaFlowError {
  readonly variables: readonly string[];
  constructor(brokers: readonly string[], variables: readonly string[], what: string, cause: unknown) {
    super('KAFKA_AUTH', `Kafka at KAFKA_BROKERS=${brokers.join(',')} ${what}: check ${variables.join(', ')} (${innermost(cause)})`, { cause });
    this.variables = variables;
  }
}

/**
 * The Temporal frontend refused this client: a wrong or expired API key, a client certificate it
 * does not accept, or a server certificate this client does not trust. Not a retryable outage:
 * the worker exits 1 with this one line.
 */
export class TemporalAuthenticationError extends KafkaFlowError {
  readonly variables: readonly string[];
  constructor(address: string, variables: readonly string[], what: string, cause: unknown) {
    super('TEMPORAL_AUTH', `Temporal at TEMPORAL_ADDRESS=${address} ${what}: check ${variables.join(', ')} (${innermost(cause)})`, { cause });
    this.variables = variables;
  }
}
