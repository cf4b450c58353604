/**
 * A plain (non-transactional) producer for snapshot writes in caching mode and for dead letters:
 * idempotent (no duplicates or reordering on retries — a reordered pair of snapshots of one key
 * would leave the older one on top after compaction), acks=all, and large sends split into
 * requests under the broker's record-batch limit. One per backend, shared by its partitions.
 */
import type { Producer, RecordMetadata } from 'kafkajs';
import type { KafkaClient } from './client';
import type { SentRecords } from './errors';
import { byTopic, chunkByBytes, countByPartition, DEFAULT_MAX_REQUEST_BYTES } from './request-size';
import { ClosedError } from '../config/errors';

/** A record to send; without a partition, kafkajs's default partitioner picks one by key. */
export interface PlainMessage {
  topic: string;
  partition?: number;
  key: string | Buffer | null;
  value: string | Buffer | null;
  headers?: Record<string, string | Buffer>;
}

export interface PlainWriterOptions {
  client: KafkaClient;
  /** See TransactionalWriterOptions.maxRequestBytes; default 1,000,000. */
  maxRequestBytes?: number;
}

export class PlainWriter {
  private readonly options: PlainWriterOptions;
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;
  private closed = false;

  constructor(options: PlainWriterOptions) {
    this.options = options;
  }

  /** Sends `messages` (acks=all) and resolves when every one is acknowledged. */
  async send(messages: readonly PlainMessage[]): Promise<SentRecords[]> {
    if (this.closed) throw new ClosedError('PlainWriter');
    const producer = await this.currentProducer();
    const sent: SentRecords[] = [];
    for (const chunk of chunkByBytes(messages, this.options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES)) {
      // The messages as they are: kafkajs reads partition, key, value and headers (and timestamp,
      // which ours never have), ignores `topic` and changes nothing — no copy per record.
      const metadata: RecordMetadata[] = await producer.sendBatch({ acks: -1, topicMessages: byTopic(chunk) });
      const counts = countByPartition(chunk);
      for (const m of metadata) {
        if (m.baseOffset === undefined) continue;
        const count = counts.get(m.topicName)?.[m.partition] ?? 0;
        sent.push({ topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset, count });
      }
    }
    return sent;
  }

  async close(): Promise<void> {
    this.closed = true;
    const producer = this.producer ?? (await this.connecting?.catch(() => undefined));
    this.producer = undefined;
    if (producer) await producer.disconnect().catch(() => undefined);
  }

  private currentProducer(): Promise<Producer> {
    if (this.producer) return Promise.resolve(this.producer);
    if (!this.connecting) {
      const producer = this.options.client.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      this.connecting = producer
        .connect()
        .then(() => {
          this.producer = producer;
          return producer;
        })
        .finally(() => {
          this.connecting = undefined;
        });
    }
    return this.connecting;
  }
}
