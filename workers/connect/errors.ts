import { KafkaFlowError } from '../../config/errors';

// The worker's own typed errors, in a module light enough for the package root to re-export.

/**
 * No broker of KAFKA_BROKERS accepts connections — or, with a `cause`, the brokers accepted them
 * but kept closing them until the Kafka client gave up joining the group (a broker restarting, a
 * network fault): the worker exits 1 and a restart (by the process manager) tries again.
 */
export class KafkaUnreachableError extends KafkaFlowError {
  constructor(brokers: string[], cause?: unknown) {
    const why =
      cause === undefined
        ? `no Kafka broker answers at KAFKA_BROKERS=${brokers.join(',')}`
        : `the Kafka brokers at KAFKA_BROKERS=${brokers.join(',')} kept closing the connection while the worker joined the group (${describeCause(cause)})`;
    super('KAFKA_UNREACHABLE', `${why}; start one with \`npm run infra:up\` or point KAFKA_BROKERS at yours`, cause === undefined ? undefined : { cause });
  }
}

/** The innermost message of an error chain, on one line. */
function describeCause(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e);
}

/** A kafkajs connection failure (after its retries), anywhere in the cause chain. */
export function isKafkaConnectionFailure(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e.name === 'KafkaJSConnectionError' || e.name === 'KafkaJSConnectionClosedError' || e.name === 'KafkaJSRequestTimeoutError') return true;
  }
  return false;
}

/** The Temporal server did not answer at TEMPORAL_ADDRESS. */
export class TemporalUnreachableError extends KafkaFlowError {
  constructor(address: string, cause: unknown) {
    super(
      'TEMPORAL_UNREACHABLE',
      `no Temporal server answers at TEMPORAL_ADDRESS=${address} (${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}); start one with \`npm run infra:up\` or point TEMPORAL_ADDRESS at yours`,
      { cause },
    );
  }
}
