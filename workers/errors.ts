import { KafkaFlowError } from '../config/errors';

// The worker's own typed errors, in a module light enough for the package root to re-export.

/** No broker of KAFKA_BROKERS accepts connections. */
export class KafkaUnreachableError extends KafkaFlowError {
  constructor(brokers: string[]) {
    super(
      'KAFKA_UNREACHABLE',
      `no Kafka broker answers at KAFKA_BROKERS=${brokers.join(',')}; start one with \`npm run infra:up\` or point KAFKA_BROKERS at yours`,
    );
  }
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
