import { ConfigError } from '../../../config/errors';
import { brokersFromEnv } from '../../../kafka/client';

describe('brokersFromEnv', () => {
  it('defaults to 127.0.0.1:9092 and splits a list', () => {
    expect(brokersFromEnv({})).toEqual(['127.0.0.1:9092']);
    expect(brokersFromEnv({ KAFKA_BROKERS: ' a:1, b:2 ,' })).toEqual(['a:1', 'b:2']);
  });
  it('rejects a broker without a port', () => {
    expect(() => brokersFromEnv({ KAFKA_BROKERS: 'localhost' })).toThrow(ConfigError);
  });
});
