import { createKafkaClient, holdingKafkajsErrors } from '../../../kafka/client';

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

describe('createKafkaClient with a logger', () => {
  it('sends each kafkajs entry to the logger at its level, with its namespace and fields, and filters the same entries', () => {
    const lines: Array<{ level: string; fields: Record<string, unknown>; msg: string }> = [];
    const at = (level: string) => (fields: unknown, msg?: string) => void lines.push({ level, fields: fields as Record<string, unknown>, msg: msg ?? '' });
    const logger = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
    const console = jest.spyOn(global.console, 'error').mockImplementation(() => {});
    const warn = jest.spyOn(global.console, 'warn').mockImplementation(() => {});
    try {
      const client = createKafkaClient({ brokers: ['127.0.0.1:1'], clientId: 't', logger, logLevel: 'info' });
      client.kafka.producer({ transactionalId: 'x', idempotent: true, maxInFlightRequests: 1, retry: { retries: 3 } });
      client.kafka.logger().namespace('Producer').warn('a warning worth reading', { broker: 'b:1' });
      client.kafka.logger().error('Failed to send messages', { error: 'Broker not available', retryCount: 2 });
      client.kafka.logger().info('joined');
      client.kafka.logger().error('Failed to send messages', {
        error: 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing',
      });
      expect(console).not.toHaveBeenCalled();
      expect(warn).not.toHaveBeenCalled();
    } finally {
      console.mockRestore();
      warn.mockRestore();
    }
    expect(lines).toEqual([
      { level: 'warn', fields: { component: 'kafkajs', namespace: 'Producer', broker: 'b:1' }, msg: 'a warning worth reading' },
      { level: 'error', fields: { component: 'kafkajs', namespace: undefined, error: 'Broker not available', retryCount: 2 }, msg: 'Failed to send messages' },
      { level: 'info', fields: { component: 'kafkajs', namespace: undefined }, msg: 'joined' },
    ]);
  });
});

describe('holdingKafkajsErrors', () => {
  const createTopicsError = (client: ReturnType<typeof createKafkaClient>) =>
    client.kafka.logger().namespace('Connection').error('Response CreateTopics(key: 19, version: 3)', { error: 'Topic creation errors' });

  it('drops the error entries it matches when the call succeeds or fails as expected, writes them at error level otherwise', async () => {
    const lines: Array<{ level: string; msg: string }> = [];
    const at = (level: string) => (_fields: unknown, msg?: string) => void lines.push({ level, msg: msg ?? '' });
    const client = createKafkaClient({ brokers: ['127.0.0.1:1'], clientId: 't', logger: { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } });
    const race = new Error('exists');
    const isRace = (err: unknown) => err === race;
    const matches = (log: { message?: unknown; error?: unknown }) => log.error === 'Topic creation errors';
    const holding = <T>(run: () => Promise<T>) => holdingKafkajsErrors(matches, run, isRace);

    // kafkajs's admin resolves (false) when every refusal was TOPIC_ALREADY_EXISTS.
    const lostRace = async () => {
      createTopicsError(client);
      return false;
    };
    await expect(holding(lostRace)).resolves.toBe(false);
    await expect(holding(async () => { createTopicsError(client); throw race; })).rejects.toBe(race);
    expect(lines).toEqual([]);

    const denied = new Error('Topic creation errors');
    await expect(holding(async () => { createTopicsError(client); throw denied; })).rejects.toBe(denied);
    expect(lines).toEqual([{ level: 'error', msg: 'Response CreateTopics(key: 19, version: 3)' }]);

    // Outside it, and for any other entry inside it, nothing changes.
    await holding(async () => client.kafka.logger().error('Failed to send messages', { error: 'Broker not available' }));
    createTopicsError(client);
    expect(lines.map((l) => l.msg)).toEqual(['Response CreateTopics(key: 19, version: 3)', 'Failed to send messages', 'Response CreateTopics(key: 19, version: 3)']);
  });
});
