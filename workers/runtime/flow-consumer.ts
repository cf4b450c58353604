import type { Consumer, EachBatchPayload } from 'kafkajs';
import type { KafkaSecurity } from '../../config/security';
import type { Logger } from '../../core/logger';
import type { FlowDefinition } from '../../define-flow';
import {
  CommittedOffsets,
  createKafkaClient,
  decodeFetchResponse,
  type GroupGeneration,
  GroupMembership,
  type RevokedPartitions,
  withRevokePoint,
} from '../../kafka';

export interface TopicPartitions {
  topic: string;
  partitions: number[];
}

/** What the group consumer calls back: joins, the awaited revoke point, and each fetched batch. */
export interface FlowConsumerHandlers {
  /** Synchronous, before anything is fetched under the new generation. */
  onJoin(g: GroupGeneration): void;
  /** After in-flight batches, before the member rejoins or leaves, with the generation given up. */
  onRevoke(revoked: RevokedPartitions): Promise<void>;
  eachBatch(payload: EachBatchPayload): Promise<void>;
}

/**
 * A flow's group consumer as the runtime uses it: the kafkajs consumer in a worker
 * (KafkaFlowConsumer), an in-memory fake in the runtime's unit tests.
 */
export interface FlowConsumer {
  /** Connects, subscribes to the flow's topics and starts consuming (manual commits, paused until recovered). */
  start(handlers: FlowConsumerHandlers): Promise<void>;
  /** Leaves the group (the revoke point runs first) and disconnects. */
  stop(): Promise<void>;
  /** Releases what is left once the activities have ended (connections used for committed offsets). */
  close(): Promise<void>;
  /** The generation of the last join, read live (a cached one is stale after the next rebalance). */
  current(): GroupGeneration | undefined;
  pause(tps: TopicPartitions[]): void;
  resume(tps: TopicPartitions[]): void;
  seek(at: { topic: string; partition: number; offset: string }): void;
  /** Commits under the member's live generation (plain mode; transactional mode commits in the transaction). */
  commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string }>): Promise<void>;
  /**
   * The group's committed offset of a partition (undefined: none yet), read stable: while a
   * transaction that moves it is pending, the read waits for its outcome (OffsetFetch
   * `require_stable`). A recovery reads it while it fences the partition's producer.
   */
  committedOffset(topic: string, partition: number): Promise<string | undefined>;
}

/** The kafkajs group consumer of one flow, with its revoke point and join tracking. */
export class KafkaFlowConsumer implements FlowConsumer {
  private readonly consumer: Consumer;
  private readonly membership = new GroupMembership();
  private readonly committed: CommittedOffsets;
  private handlers?: FlowConsumerHandlers;

  constructor(
    private readonly definition: FlowDefinition<unknown, unknown>,
    brokers: string[],
    security?: KafkaSecurity,
    /** Where kafkajs logs (the worker's logger); default kafkajs's console. */
    logger?: Logger,
  ) {
    const kafka = createKafkaClient({ brokers, clientId: `kafka-flow-temporal-${definition.name}`, security, logger });
    this.committed = new CommittedOffsets(kafka);
    this.consumer = kafka.kafka.consumer(
      withRevokePoint(
        // maxWaitTimeInMs: kafkajs sleeps this long whenever every assigned partition is paused
        // (all are, until recovered), and a partition resumed while a fetch of the others waits
        // at the broker joins only the next fetch: its 5 s default would delay every start and
        // rebalance, and 250 ms still cost a recovered partition 0-250 ms before its first batch
        // (measured: scripts/assign-latency.ts). 100 ms: an idle worker sends ten empty fetches a second.
        // maxBytes: kafkajs decodes a whole fetch response in one go on the event loop the Temporal
        // workers share (activity starts, heartbeats, completions); its 10 MB default (1 MB per
        // partition) made that a ~150,000-record stretch under load, and the persist cycle (the
        // commit lag) stretched with it. 2 MB a fetch keeps each stretch short at the same rate
        // (1 MB and 512 KB measured slower: kafkajs pays a fixed cost per fetch).
        // fetchResponseDecoder (the kafkajs patch's opt-in): the record batches are decoded by
        // kafka/fetch-decoder.ts, kafkajs's result at a fraction of its CPU and garbage (no Long
        // per record); compressed batches and other versions still by kafkajs.
        {
          groupId: definition.groupId,
          readUncommitted: false,
          allowAutoTopicCreation: false,
          maxWaitTimeInMs: 100,
          maxBytes: 2 * 1024 * 1024,
          maxBytesPerPartition: 512 * 1024,
          sessionTimeout: definition.consumer.sessionTimeoutMs,
          heartbeatInterval: definition.consumer.heartbeatIntervalMs,
          rebalanceTimeout: definition.consumer.rebalanceTimeoutMs,
          fetchResponseDecoder: decodeFetchResponse,
        },
        (revoked) => this.handlers?.onRevoke(revoked) ?? Promise.resolve(),
      ),
    );
  }

  async start(handlers: FlowConsumerHandlers): Promise<void> {
    this.handlers = handlers;
    this.membership.attach(this.consumer);
    this.membership.onJoin((g) => handlers.onJoin(g));
    await this.consumer.connect();
    for (const topic of this.definition.topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: (payload) => handlers.eachBatch(payload),
    });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }

  async close(): Promise<void> {
    await this.committed.close();
  }

  current(): GroupGeneration | undefined {
    return this.membership.current();
  }

  pause(tps: TopicPartitions[]): void {
    this.consumer.pause(tps);
  }

  resume(tps: TopicPartitions[]): void {
    this.consumer.resume(tps);
  }

  seek(at: { topic: string; partition: number; offset: string }): void {
    this.consumer.seek(at);
  }

  async commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string }>): Promise<void> {
    await this.consumer.commitOffsets(offsets);
  }

  async committedOffset(topic: string, partition: number): Promise<string | undefined> {
    return (await this.committed.fetch(this.definition.groupId, topic, [partition])).get(partition) ?? undefined;
  }
}
