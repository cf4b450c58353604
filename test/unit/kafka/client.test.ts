import { ConfigError } from '../../../config/errors';
import { brokersFromEnv, createKafkaClient } from '../../../kafka/client';

describe('brokersFromEnv', () => {
  it('defaults to 127.0.0.1:9092 and splits a list', () => {
    expect(brokersFromEnv({})).toEqual(['127.0.0.1:9092']);
    expect(brokersFromEnv({ KAFKA_BROKERS: ' a:1, b:2 ,' })).toEqual(['a:1', 'b:2']);
  });
  it('rejects a broker without a port', () => {
    expect(() => brokersFromEnv({ KAFKA_BROKERS: 'localhost' })).toThrow(ConfigError);
  });
});

describe('createKafkaClient logging', () => {
  it('drops kafkajs\'s misleading bounded-retries warning and keeps its other warnings', () => {
    const warnings: string[] = [];
    const spy = jest.spyOn(console, 'warn').mockImplementation((line: unknown) => void warnings.push(String(line)));
    try {
      const client = createKafkaClient({ brokers: ['127.0.0.1:1'], clientId: 't' });
      client.kafka.producer({ transactionalId: 'x', idempotent: true, maxInFlightRequests: 1, retry: { retries: 3 } });
      client.kafka.logger().warn('a warning worth reading');
    } finally {
      spy.mockRestore();
    }
    expect(warnings.some((w) => w.includes('Limiting retries'))).toBe(false);
    expect(warnings.some((w) => w.includes('a warning worth reading'))).toBe(true);
  });
});
