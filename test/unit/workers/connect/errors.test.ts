import { KafkaJSConnectionError, KafkaJSProtocolError } from 'kafkajs';
import { formatFatal } from '../../../../config/errors';
import { isKafkaConnectionFailure, KafkaUnreachableError } from '../../../../workers/connect/errors';

// What a worker prints when the brokers accept connections but keep dropping them while it joins
// the group (seen in the chaos suite: a network fault during a worker's start).

/** kafkajs's error shape (name + cause); not every class is in its type definitions. */
function kafkaError(name: string, message: string, cause?: Error): Error {
  const e = new Error(message, { cause });
  e.name = name;
  return e;
}

test('a kafkajs connection failure anywhere in the cause chain is recognised; a protocol error is not', () => {
  const gaveUp = kafkaError('KafkaJSNonRetriableError', 'Closed connection', kafkaError('KafkaJSConnectionClosedError', 'Closed connection'));
  expect(isKafkaConnectionFailure(gaveUp)).toBe(true);
  expect(isKafkaConnectionFailure(new KafkaJSConnectionError('Connection error: read ECONNRESET'))).toBe(true);
  expect(isKafkaConnectionFailure(new KafkaJSProtocolError('The group is rebalancing'))).toBe(false);
  expect(isKafkaConnectionFailure(new Error('boom'))).toBe(false);
});

test('the error names KAFKA_BROKERS and the innermost cause, on one line', () => {
  const cause = kafkaError('KafkaJSNonRetriableError', 'gave up', new KafkaJSConnectionError('Connection error: read ECONNRESET'));
  const err = new KafkaUnreachableError(['127.0.0.1:9092'], cause);
  expect(err.code).toBe('KAFKA_UNREACHABLE');
  const line = formatFatal(err);
  expect(line).toContain('KAFKA_BROKERS=127.0.0.1:9092');
  expect(line).toContain('kept closing the connection');
  expect(line).toContain('KafkaJSConnectionError: Connection error: read ECONNRESET');
  expect(line.split('\n')).toHaveLength(1);
  expect(formatFatal(new KafkaUnreachableError(['127.0.0.1:9092']))).toContain('no Kafka broker answers at KAFKA_BROKERS=127.0.0.1:9092');
});
