import { type Admin, type Consumer, type ConsumerRunConfig, type EachBatchPayload, PartitionAssigners } from 'kafkajs';
import { type MemberHints, stateAssigner } from '../../kafka/state-assignor';
import type { KafkaSecurity } from '../../config/security';
import type { CommittedPosition } from '../../persistence/offset-committer';
import { type Logger, silentLogger } from '../../core/logger';
import type { FlowDefinition } from '../../define-flow';
import {
  CommittedOffsets,
  createKafkaClient,
  decodeFetchResponse,
  type GroupGeneration,
  GroupMembership,
  type KafkaClient,
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
  /**
   * A fetch of the partition at `fetchOffset` was out of its range (the broker no longer or never
   * held that offset). kafkajs would commit its default offset to the group by itself; the runtime
   * decides instead (seek, or stop the partition), and nothing is committed here.
   */
  onOffsetOutOfRange(at: { topic: string; partition: number; fetchOffset: string }): Promise<void>;
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
  /** The first join after generation `after` (now, if it came already), or undefined if none comes within `timeoutMs`. */
  joinAfter(after: number, timeoutMs: number): Promise<GroupGeneration | undefined>;
  pause(tps: TopicPartitions[]): void;
  resume(tps: TopicPartitions[]): void;
  seek(at: { topic: string; partition: number; offset: string }): void;
  /** Commits under the member's live generation (plain mode; transactional mode commits in the transaction). */
  commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string; metadata?: string }>): Promise<void>;
  /** The partition's log start and log end (the offset the next record will take), from the broker. */
  logRange(topic: string, partition: number): Promise<{ start: number; end: number }>;
  /**
   * The group's committed offset of a partition and the metadata committed with it (undefined: none yet), read stable: while a
   * transaction that moves it is pending, the read waits for its outcome (OffsetFetch
   * `require_stable`). A recovery reads it while it fences the partition's producer.
   */
  committedPosition(topic: string, partition: number): Promise<CommittedPosition | undefined>;
}

/** The first wait before the consumer rejoins after an error kafkajs does not retry; doubled each time, up to the last. */
/** The state-aware assignor's inputs: this member's hints at each join, and the standby copies per partition. */
export interface StateAssignment {
  readonly hints: () => MemberHints;
  readonly standbyReplicas: number;
  /** The cooperative protocol (kafka/state-assignor.ts): only partitions that move are revoked. */
  readonly cooperative?: boolean;
}

export const REJOIN_FIRST_MS = 1_000;
export const REJOIN_MAX_MS = 30_000;

/**
 * The kafkajs group consumer of one flow, with its revoke point and join tracking.
 *
 * kafkajs restarts its consumer after a retriable error only: after one it does not retry (its
 * coordinator lookup giving up while the only broker is out of reach — KafkaJSGroupCoordinatorNotFound
 * — is the common one) the consumer has left the group and stays stopped, and a worker would go on
 * polling Temporal with nothing to fold. So this consumer rejoins by itself, after 1 s, 2 s, … up
 * to 30 s between attempts, until `stop()`: its partitions were revoked when kafkajs stopped it
 * (the revoke point ran), and the rejoin assigns and recovers them as any rebalance does.
 */
export class KafkaFlowConsumer implements FlowConsumer {
  private readonly consumer: Consumer;
  private readonly membership = new GroupMembership();
  private readonly committed: CommittedOffsets;
  private readonly kafka: KafkaClient;
  /** For the log range of a partition whose fetch was out of range (rare): connected when first needed. */
  private admin?: Promise<Admin>;
  private handlers?: FlowConsumerHandlers;
  private runConfig?: ConsumerRunConfig;
  private stopping = false;
  /** Rejoins since the last join. */
  private rejoins = 0;
  private rejoinTimer?: NodeJS.Timeout;

  /** A consumer of `definition`'s group on its own client of `brokers` (the worker's). */
  static of(definition: FlowDefinition<unknown, unknown>, brokers: string[], security?: KafkaSecurity, logger?: Logger, assignment?: StateAssignment): KafkaFlowConsumer {
    return new KafkaFlowConsumer(definition, createKafkaClient({ brokers, clientId: `kafka-flow-temporal-${definition.name}`, security, logger }), logger, assignment);
  }

  constructor(
    private readonly definition: FlowDefinition<unknown, unknown>,
    kafka: KafkaClient,
    /** Where the consumer's own warnings go (the worker's logger; kafkajs's lines go where `kafka` sends them). */
    private readonly log: Logger = silentLogger,
    /** With local state: the state-aware assignor (kafka/state-assignor.ts), round robin with members that lack it. */
    assignment?: StateAssignment,
  ) {
    this.committed = new CommittedOffsets(kafka);
    this.kafka = kafka;
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
        // onOffsetOutOfRange (the patch's opt-in): instead of kafkajs committing its default offset
        // to the group — outside the partition's fenced commit — the runtime decides.
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
          ...(assignment
            ? {
                // Cooperative first; the eager ones after it so that members of an earlier version
                // (eager) can share the group during a rolling upgrade — the group then runs eager,
                // and turns cooperative at the first rebalance without them.
                partitionAssigners: [
                  ...(assignment.cooperative ? [stateAssigner(assignment.hints, assignment.standbyReplicas, true)] : []),
                  stateAssigner(assignment.hints, assignment.standbyReplicas),
                  PartitionAssigners.roundRobin,
                ],
              }
            : {}),
          onOffsetOutOfRange: (at) => this.handlers?.onOffsetOutOfRange(at) ?? Promise.resolve(),
        },
        (revoked) => this.handlers?.onRevoke(revoked) ?? Promise.resolve(),
      ),
    );
  }

  async start(handlers: FlowConsumerHandlers): Promise<void> {
    this.handlers = handlers;
    this.membership.attach(this.consumer);
    this.membership.onJoin((g) => {
      this.rejoins = 0;
      handlers.onJoin(g);
    });
    this.consumer.on(this.consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) this.rejoinLater(payload.error);
    });
    await this.consumer.connect();
    for (const topic of this.definition.topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    this.runConfig = {
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: (payload) => handlers.eachBatch(payload),
    };
    await this.consumer.run(this.runConfig);
  }

  /** After a crash kafkajs does not restart from: run again (kafkajs reconnects and joins) after a growing pause. */
  private rejoinLater(error: Error): void {
    if (this.stopping || this.rejoinTimer || !this.runConfig) return;
    const inMs = Math.min(REJOIN_MAX_MS, REJOIN_FIRST_MS * 2 ** this.rejoins);
    this.rejoins += 1;
    this.log.warn(
      { err: error, inMs, attempt: this.rejoins },
      `the Kafka consumer stopped on an error kafkajs does not retry (${error.name}): rejoining the group in ${inMs} ms`,
    );
    this.rejoinTimer = setTimeout(() => {
      this.rejoinTimer = undefined;
      if (this.stopping || !this.runConfig) return;
      // A failed start crashes again (the CRASH listener schedules the next attempt).
      this.consumer.run(this.runConfig).catch((err: Error) => this.rejoinLater(err));
    }, inMs);
    this.rejoinTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.rejoinTimer);
    this.rejoinTimer = undefined;
    await this.consumer.disconnect();
  }

  async close(): Promise<void> {
    await this.committed.close();
    const admin = this.admin;
    this.admin = undefined;
    if (admin) await admin.then((a) => a.disconnect()).catch(() => undefined);
  }

  current(): GroupGeneration | undefined {
    return this.membership.current();
  }

  joinAfter(after: number, timeoutMs: number): Promise<GroupGeneration | undefined> {
    return this.membership.waitForJoin(timeoutMs, after).catch(() => undefined);
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

  async commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string; metadata?: string }>): Promise<void> {
    await this.consumer.commitOffsets(offsets);
  }

  async logRange(topic: string, partition: number): Promise<{ start: number; end: number }> {
    if (!this.admin) {
      const admin = this.kafka.kafka.admin();
      this.admin = admin.connect().then(() => admin);
      this.admin.catch(() => (this.admin = undefined));
    }
    const offsets = await (await this.admin).fetchTopicOffsets(topic);
    const p = offsets.find((o) => o.partition === partition);
    if (!p) throw new Error(`${topic}-${partition}: no such partition in the topic's offsets`);
    return { start: Number(p.low), end: Number(p.high) };
  }

  async committedPosition(topic: string, partition: number): Promise<CommittedPosition | undefined> {
    return (await this.committed.positions(this.definition.groupId, topic, [partition])).get(partition) ?? undefined;
  }
}
