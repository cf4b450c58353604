/**
 * The kafkajs internals the port relies on, typed narrowly, in one place. kafkajs is pinned to
 * exactly 2.2.4 and patched (patches/kafkajs+2.2.4.patch); these modules are part of that
 * pinned surface, not of its public API.
 */
import { createRequire } from 'node:module';
import type { KafkaClient } from './client';

const requireKafkajs = createRequire(require.resolve('kafkajs'));

export const ISOLATION = { READ_UNCOMMITTED: 0, READ_COMMITTED: 1 } as const;

export interface RawMessage {
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
    responses: Array<{ topic: string; partitions: Array<{ partition: number; offset: string; errorCode: number }> }>;
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

/** A kafkajs cluster (metadata + broker connections) with no group, producer or consumer on it. */
export function createCluster(client: KafkaClient, isolationLevel: number): InternalCluster {
  return new Cluster({
    logger: createLogger({ level: client.logLevel, logCreator: client.logCreator }),
    socketFactory: defaultSocketFactory(),
    brokers: client.brokers,
    clientId: client.clientId,
    ...client.connection,
    connectionTimeout: 1000,
    requestTimeout: 30000,
    enforceRequestTimeout: true,
    retry: { retries: 5 },
    allowAutoTopicCreation: false,
    isolationLevel,
  });
}

export function createBatch(topic: string, fetchedOffset: string, data: FetchPartitionData): InternalBatch {
  return new Batch(topic, fetchedOffset, data);
}

/** The Fetch API's key (kafkajs's apiKeys.Fetch). */
const FETCH_API_KEY = 1;
const FETCH_DECODER = Symbol('kafka-flow-temporal fetch decoder');
type MadeRequest = { request: { apiVersion: number }; response: { decode(raw: Buffer): Promise<unknown> } };
type RequestLookup = ((apiKey: number, definition: unknown) => (args: unknown) => MadeRequest) & { [FETCH_DECODER]?: true };

/**
 * Makes `broker` decode its Fetch v11 responses with `decode`, falling back to kafkajs's decoder
 * where it answers undefined (other versions always use kafkajs's). For a cluster of our own only
 * (PartitionReader's). kafkajs rebuilds a broker's request lookup when it (re)connects, so this is
 * called before each fetch; a fetch sent right after a reconnect simply uses kafkajs's decoder.
 */
export function useFetchDecoder(broker: InternalBroker, decode: (raw: Buffer) => unknown | undefined): void {
  const b = broker as unknown as { lookupRequest: RequestLookup };
  const lookup = b.lookupRequest;
  if (typeof lookup !== 'function' || lookup[FETCH_DECODER]) return;
  const wrapped: RequestLookup = (apiKey, definition) => {
    const make = lookup.call(b, apiKey, definition);
    if (apiKey !== FETCH_API_KEY) return make;
    return (args) => {
      const made = make(args);
      if (made.request.apiVersion !== 11) return made;
      const kafkajsDecode = made.response.decode;
      return { ...made, response: { ...made.response, decode: async (raw: Buffer) => decode(raw) ?? kafkajsDecode(raw) } };
    };
  };
  wrapped[FETCH_DECODER] = true;
  b.lookupRequest = wrapped;
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
