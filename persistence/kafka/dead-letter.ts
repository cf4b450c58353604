/**
 * The dead-letter producer for the engine's `dead-letter` decode-failure policy: an undecodable
 * input record is produced as it was (key, value, headers) to the flow's dead-letter topic, with
 * headers saying where it came from and why, and acknowledged (acks=all) before the batch goes
 * on — so its offset is never committed before the dead-letter topic has it.
 */
import type { DecodeError } from '../../flow/codec/errors';
import type { DeadLetterSink } from '../../flow/decode-policy';
import type { Logger } from '../../flow/logger';
import { silentLogger } from '../../flow/logger';
import type { InputMessage } from '../../flow/record';
import { KafkaAdmin } from '../../kafka/admin';
import type { KafkaClient } from '../../kafka/client';
import { PlainWriter } from '../../kafka/plainWriter';
import type { TopicPartition } from '../types';

export const DEAD_LETTER_HEADERS = {
  topic: 'kafka-flow-dead-letter-topic',
  partition: 'kafka-flow-dead-letter-partition',
  offset: 'kafka-flow-dead-letter-offset',
  error: 'kafka-flow-dead-letter-error',
} as const;

export interface DeadLetterProducerOptions {
  client: KafkaClient;
  topic: string;
  logger?: Logger;
}

export class DeadLetterProducer {
  readonly topic: string;
  private readonly writer: PlainWriter;
  private readonly o: DeadLetterProducerOptions;
  private readonly log: Logger;
  private sent = 0;

  constructor(options: DeadLetterProducerOptions) {
    this.o = options;
    this.topic = options.topic;
    this.writer = new PlainWriter({ client: options.client });
    this.log = options.logger ?? silentLogger;
  }

  /** Creates the dead-letter topic if it does not exist (plain retention; not compacted). */
  async ensureTopic(partitions = 1, replicationFactor = 1): Promise<void> {
    const admin = new KafkaAdmin(this.o.client);
    try {
      await admin.ensureTopics([{ topic: this.topic, partitions, replicationFactor }]);
    } finally {
      await admin.close();
    }
  }

  /** Records dead-lettered by this producer. */
  get count(): number {
    return this.sent;
  }

  /** The engine's DeadLetterSink. */
  readonly sink: DeadLetterSink = async (message: InputMessage, error: DecodeError, from: TopicPartition) => {
    const headers: Record<string, string | Buffer> = {};
    for (const [name, value] of Object.entries(message.headers ?? {})) {
      if (value === undefined) continue;
      // Kafka allows repeated headers; kafkajs sends one value per name: keep the last.
      const one = Array.isArray(value) ? value[value.length - 1] : value;
      if (one !== undefined) headers[name] = one;
    }
    headers[DEAD_LETTER_HEADERS.topic] = from.topic;
    headers[DEAD_LETTER_HEADERS.partition] = String(from.partition);
    headers[DEAD_LETTER_HEADERS.offset] = message.offset;
    headers[DEAD_LETTER_HEADERS.error] = error.message;
    await this.writer.send([{ topic: this.topic, key: message.key, value: message.value, headers }]);
    this.sent++;
    this.log.warn({ topic: from.topic, partition: from.partition, offset: message.offset, deadLetterTopic: this.topic }, 'dead-lettered an undecodable record');
  };

  async close(): Promise<void> {
    await this.writer.close();
  }
}
