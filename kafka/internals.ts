/**
 * The kafkajs internals the port relies on, typed narrowly, in one place. kafkajs is pinned to
 * exactly 2.2.4 and patched (patches/kafkajs+2.2.4.patch); these modules are part of that
 * pinned surface, not of its public API.
 */
import { createRequire } from 'node:module';
import type { KafkaClient } from './client';
import { registerKafkajsExtensions } from './protocol/extensions';

const requireKafkajs = createRequire(require.resolve('kafkajs'));

export const ISOLATION = { READ_UNCOMMITTED: 0, READ_COMMITTED: 1 } as const;

export interface RawMessage {
  /** Set by kafkajs's decoder and ours (2); not read by the port. */
  magicByte?: number;
  /** A record's attributes byte (unused by Kafka), as kafkajs gives it. */
  attributes?: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  timestamp: string;
  headers: Record<string, Buffer | Buffer[] | undefined>;
  isControlRecord: boolean;
  batchContext: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

export interface FetchPartitionData {
  partition: number;
  errorCode: number;
  highWatermark: string;
  lastStableOffset: string;
  abortedTransactions: Array<{ producerId: string; firstOffset: string }>;
  messages: RawMessage[];
}

export interface InternalBroker {
  fetch(request: {
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }> }>;
    /** The patch's opt-in decoder (kafka/fetch-decoder.ts): undefined leaves a response to kafkajs's. */
    decodeResponse?: (raw: Buffer, apiVersion: number) => unknown;
  }): Promise<{ responses: Array<{ topicName: string; partitions: FetchPartitionData[] }> }>;
  listOffsets(request: {
    isolationLevel: number;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; timestamp: number }> }>;
  }): Promise<{ responses: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> }>;
  offsetFetch(request: {
    groupId: string;
    topics: Array<{ topic: string; partitions: Array<{ partition: number }> }>;
    requireStable?: boolean;
  }): Promise<{
    responses: Array<{ topic: string; partitions: Array<{ partition: number; offset: string; metadata?: string | null; errorCode: number }> }>;
  }>;
}

export interface InternalCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadata(): Promise<void>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(args: { nodeId: string }): Promise<InternalBroker>;
  findGroupCoordinator(args: { groupId: string }): Promise<InternalBroker>;
}

export interface InternalBatch {
  /** Records of the fetch at or after the fetched offset, aborted ones and control records removed. */
  messages: RawMessage[];
  /** Every record of the fetch at or after the fetched offset (control records included). */
  messagesWithinOffset: RawMessage[];
}

type ClusterCtor = new (options: Record<string, unknown>) => InternalCluster;
type BatchCtor = new (topic: string, fetchedOffset: string, partitionData: FetchPartitionData) => InternalBatch;

const Cluster = requireKafkajs('./src/cluster') as ClusterCtor;
const Batch = requireKafkajs('./src/consumer/batch') as BatchCtor;
const { createLogger } = requireKafkajs('./src/loggers') as {
  createLogger(args: { level: number; logCreator: unknown }): unknown;
};
const LoggerConsole = requireKafkajs('./src/loggers/console') as unknown;

/** kafkajs's own console log creator (its default). */
export const kafkajsConsoleLogCreator = LoggerConsole as (level: number) => (entry: { level: number; log: { message?: string; error?: unknown } }) => void;
const defaultSocketFactory = requireKafkajs('./src/network/socketFactory') as () => unknown;
const { createErrorFromCode: createError } = requireKafkajs('./src/protocol/error') as {
  createErrorFromCode(code: number): Error;
};

/**
 * A kafkajs cluster (metadata + broker connections) with no group, producer or consumer on it; the
 * kafkajs patch's hooks registered, as for every kafkajs client (`newKafka`).
 */
export function createCluster(client: KafkaClient, isolationLevel: number): InternalCluster {
  registerKafkajsExtensions();
  return new Cluster({
    logger: createLogger({ level: client.logLevel, logCreator: client.logCreator }),
    socketFactory: defaultSocketFactory(),
    brokers: client.brokers,
    clientId: client.clientId,
    connectionTimeout: 1000,
    requestTimeout: 30000,
    // TLS/SASL, and what a test sets for its connections (socket factory, request timeout).
    ...client.connection,
    enforceRequestTimeout: true,
    retry: { retries: 5 },
    allowAutoTopicCreation: false,
    isolationLevel,
  });
}

/** Whether `err`, or an error it was caused by, is kafkajs's request timeout (no answer within requestTimeout). */
export function isRequestTimeout(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e.name === 'KafkaJSRequestTimeoutError') return true;
  }
  return false;
}

/**
 * A group-less cluster that drops its connections after a request of it timed out, so that the next
 * request opens new ones. kafkajs keeps a connection whose request timed out, and one that stopped
 * answering altogether (half-open after a network fault, or its stream out of step: kafkajs logs
 * "Response without match") then fails every later request after the same timeout: the chaos run of
 * seed 29101 had 12 partitions of a live worker `recovering` for its last 65 s, each recovery retry
 * timing out on the same dead connection. Dropping them costs the cluster's other requests in flight
 * a retry; on a dead connection they would have timed out too.
 */
export class ResettingCluster {
  private connectedCluster?: Promise<InternalCluster>;

  constructor(
    private readonly make: () => InternalCluster,
    /** After connecting, before the first request (e.g. a metadata refresh). */
    private readonly afterConnect?: (cluster: InternalCluster) => Promise<void>,
  ) {}

  /** The connected cluster (connecting a new one after a reset). */
  get(): Promise<InternalCluster> {
    if (!this.connectedCluster) {
      const cluster = this.make();
      const connecting = (async () => {
        await cluster.connect();
        await this.afterConnect?.(cluster);
        return cluster;
      })();
      this.connectedCluster = connecting;
      // A failed connect is not kept: the next request tries again.
      connecting.catch(() => {
        if (this.connectedCluster === connecting) this.connectedCluster = undefined;
      });
    }
    return this.connectedCluster;
  }

  /** Runs `request` on the connected cluster; a request timeout drops its connections (above) and is rethrown. */
  async run<T>(request: (cluster: InternalCluster) => Promise<T>): Promise<T> {
    const current = this.get();
    const cluster = await current;
    try {
      return await request(cluster);
    } catch (err) {
      if (isRequestTimeout(err) && this.connectedCluster === current) {
        this.connectedCluster = undefined;
        await cluster.disconnect().catch(() => undefined);
      }
      throw err;
    }
  }

  async close(): Promise<void> {
    const current = this.connectedCluster;
    this.connectedCluster = undefined;
    const cluster = await current?.catch(() => undefined);
    await cluster?.disconnect();
  }
}

export function createBatch(topic: string, fetchedOffset: string, data: FetchPartitionData): InternalBatch {
  return new Batch(topic, fetchedOffset, data);
}

const filterAborted = requireKafkajs('./src/consumer/filterAbortedMessages') as (args: {
  messages: RawMessage[];
  abortedTransactions: FetchPartitionData['abortedTransactions'];
}) => RawMessage[];

/**
 * The records of a fetch that took no part in an aborted transaction (kafkajs's patched filter, as
 * its Batch applies it; see docs/kafkajs-patch.md). The same array when none was aborted.
 */
export function withoutAborted(messages: RawMessage[], abortedTransactions: FetchPartitionData['abortedTransactions'] | undefined): RawMessage[] {
  return abortedTransactions && abortedTransactions.length > 0 ? filterAborted({ messages, abortedTransactions }) : messages;
}

const murmur2 = requireKafkajs('./src/producer/partitioners/default/murmur2') as (key: string | Buffer) => number;

/** The partition Kafka's default partitioner (Java's and kafkajs's: murmur2) gives `key` among `count`. */
export function keyPartition(key: string | Buffer, count: number): number {
  return (murmur2(key) & 0x7fffffff) % count;
}

/** The kafkajs protocol error for a response's error code (typed `type`, `code`, `retriable`). */
export function createErrorFromCode(code: number): Error {
  return createError(code);
}
