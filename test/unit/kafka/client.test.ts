import { createKafkaClient } from '../../../kafka/client';

describe('createKafkaClient logging', () => {
  it('drops kafkajs\'s misleading bounded-retries warning and its routine CONCURRENT_TRANSACTIONS retry errors, keeps the rest', () => {
    const warnings: string[] = [];
    const spy = jest.spyOn(console, 'warn').mockImplementation((line: unknown) => void warnings.push(String(line)));
    const errors = jest.spyOn(console, 'error').mockImplementation((line: unknown) => void warnings.push(String(line)));
    try {
      const client = createKafkaClient({ brokers: ['127.0.0.1:1'], clientId: 't' });
      client.kafka.producer({ transactionalId: 'x', idempotent: true, maxInFlightRequests: 1, retry: { retries: 3 } });
      client.kafka.logger().warn('a warning worth reading');
      const routine = 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing';
      client.kafka.logger().error('Failed to send messages', { error: routine });
      client.kafka.logger().error(`Failed to send messages: ${routine}`, { retryCount: 0 });
      client.kafka.logger().error('Failed to send messages', { error: 'Broker not available' });
    } finally {
      spy.mockRestore();
      errors.mockRestore();
    }
    expect(warnings.some((w) => w.includes('Limiting retries'))).toBe(false);
    expect(warnings.some((w) => w.includes('concurrent operation on the same transaction'))).toBe(false); // CONCURRENT_TRANSACTIONS retries
    expect(warnings.some((w) => w.includes('Broker not available'))).toBe(true);
    expect(warnings.some((w) => w.includes('a warning worth reading'))).toBe(true);
  });
});
