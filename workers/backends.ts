import type { KafkaSecurity } from '../config/security';
import type { FlowDefinition } from '../flow/define-flow';
import type { Logger } from '../core/logger';
import type { FlowMetrics } from '../flow/metrics';
import { KafkaAdmin } from '../kafka/admin';
import { createKafkaClient } from '../kafka/client';
import { PlainWriter } from '../kafka/plain-writer';
import { CassandraBackend } from '../persistence/cassandra';
import { KafkaFlowBackend, OutputProducer, OutputTopics, type WriteGeneration } from '../persistence/kafka';
import { InMemoryJournalStore, InMemoryKeyStore, InMemorySnapshotStore } from '../persistence/memory';
import type { OffsetCommitter } from '../persistence/offset-committer';
import type { PartitionPersistence } from '../persistence/partition-persistence';
import { StorePartitionPersistence } from '../persistence/store-partition-persistence';
import type { TopicPartition } from '../persistence/types';

/** What a backend needs from the worker to build one partition's persistence. */
export interface PartitionOwnership extends TopicPartition {
  readonly groupId: string;
  readonly generation: number;
  readonly memberId: string;
  /** Commits the input offset with the consumer group's generation (non-transactional backends). */
  readonly committer: OffsetCommitter;
  /**
   * The generation under which this process holds the partition now, read for each transaction:
   * the assignment's, or a later one if the partition came back to this process and kept its
   * state. A commit under it fails once the group has moved on without us.
   */
  readonly liveGeneration?: () => WriteGeneration;
}

/** A flow's persistence backend in a worker process. */
export interface PersistenceBackend<S, V> {
  forPartition(ownership: PartitionOwnership): Promise<PartitionPersistence<S, V>>;
  /** The partition was revoked for good: close what it held (its transactional producer). */
  release?(partition: TopicPartition): Promise<void>;
  close(): Promise<void>;
}

/**
 * The `memory` backend: stores live in this process only, so state survives a rebalance that
 * gives a partition back to the same process but not a restart. For tests and trying things out.
 */
export function memoryBackend<S, V>(definition: FlowDefinition<S, V>): PersistenceBackend<S, V> {
  const snapshots = new InMemorySnapshotStore<S>();
  const journal = new InMemoryJournalStore<V>();
  const keys = new InMemoryKeyStore();
  return {
    forPartition: async (o) =>
      new StorePartitionPersistence<S, V>({
        partition: { topic: o.topic, partition: o.partition },
        mode: definition.persistence.mode,
        snapshots,
        journal,
        keys,
        committer: o.committer,
      }),
    close: async () => {},
  };
}

/**
 * A kafka flow's snapshot backends (one per input topic), for workers and for `inspect`
 * (`readAll({ topic?, partition? })` reads the snapshot topics without a group or a fence).
 */
export function kafkaFlowBackend<S, V>(definition: FlowDefinition<S, V>, worker: WorkerContext): KafkaFlowBackend<S, V> {
  const p = definition.persistence;
  if (p.backend !== 'kafka') throw new TypeError(`flow "${definition.name}" does not persist to Kafka`);
  const extra = p.options as { transactionalIdPrefix?: string; replicationFactor?: number };
  const localState = worker.localState ? localStateOf(definition, worker) : undefined;
  return new KafkaFlowBackend<S, V>({
    // Local state on: the backend logs and counts its restores on the worker's logger and registry.
    ...(localState ? { localState, logger: worker.logger, metrics: worker.metrics } : {}),
    client: createKafkaClient({ brokers: worker.brokers, clientId: `kafka-flow-temporal-${definition.name}-snapshots`, security: worker.kafkaSecurity }),
    flowName: definition.name,
    groupId: definition.groupId,
    topics: definition.topics,
    transactional: p.transactional,
    maxWritesPerTransaction: p.maxWritesPerTransaction,
    recoveryStallTimeoutMs: p.recoveryStallTimeoutMs,
    snapshotTopic: p.snapshotTopic,
    compressionThreshold: p.compressionThreshold,
    transactionalIdPrefix: extra.transactionalIdPrefix,
    replicationFactor: extra.replicationFactor,
    deadLetterTopics: definition.deadLetterTopics,
    outputTopics: definition.outputTopics,
  });
}

/** What a worker (or `inspect`) offers the backend it builds; the settings come parsed from config/env. */
export interface WorkerContext {
  /** `KAFKA_BROKERS`: snapshot topics and dead letters. */
  readonly brokers: string[];
  /** KAFKA_SSL_* / KAFKA_SASL_* (config/security); default plaintext. */
  readonly kafkaSecurity?: KafkaSecurity;
  readonly logger?: Logger;
  readonly metrics?: FlowMetrics;
  /** Honour persistence.localState and `stateDir` (workers; not `inspect`). */
  readonly localState?: boolean;
  /** The worker's `KFT_STATE_DIR`, if set. */
  readonly stateDir?: string;
}

/** persistence.localState, or KFT_STATE_DIR (which turns it on for transactional flows and overrides the dir). */
function localStateOf(definition: Pick<FlowDefinition<unknown, unknown>, 'name' | 'persistence'>, worker: WorkerContext): { dir: string } | undefined {
  const p = definition.persistence;
  if (p.backend !== 'kafka') return undefined;
  if (worker.stateDir) {
    if (p.transactional) return { dir: worker.stateDir };
    worker.logger?.warn({ flow: definition.name }, 'KFT_STATE_DIR ignored: local state needs transactional Kafka persistence');
    return undefined;
  }
  return p.localState;
}

/**
 * The `kafka` backend: snapshots in a compacted topic per input topic (see
 * docs/kafka-persistence.md). A transient flow (`mode: 'none'`) persists nothing: it only commits
 * offsets, through the consumer.
 */
export function kafkaBackend<S, V>(definition: FlowDefinition<S, V>, worker: WorkerContext): PersistenceBackend<S, V> {
  if (definition.persistence.mode === 'none') return memoryBackend(definition);
  const backend = kafkaFlowBackend(definition, { ...worker, localState: true });
  return {
    forPartition: (o) => {
      // The generation is read for each transaction: a live reader when the worker offers one
      // (a rebalance that keeps the partition still bumps it), else the one captured at assignment.
      return backend.forPartition({ ...o, generation: o.liveGeneration ?? { generationId: o.generation, memberId: o.memberId } });
    },
    release: (tp) => backend.forTopic(tp.topic).release(tp.partition),
    close: () => backend.close(),
  };
}

/**
 * The `cassandra` backend (docs/cassandra.md): started on first use (connect, check or create the
 * schema); snapshot writes fenced by LWT on (generation, offset); offsets committed by the consumer.
 */
export function cassandraBackend<S, V>(definition: FlowDefinition<S, V>, worker: Pick<WorkerContext, 'brokers' | 'kafkaSecurity'>): PersistenceBackend<S, V> {
  let started: Promise<CassandraBackend<S, V>> | undefined;
  const backend = () => {
    // A failed start (Cassandra unreachable, schema not answerable) is not kept: the next
    // assignment or retry of recovery connects again, so a worker that started while Cassandra
    // was down heals once it is back.
    started ??= CassandraBackend.forFlow<S, V>(definition).catch((err: unknown) => {
      started = undefined;
      throw err;
    });
    return started;
  };
  // Dead letters and emitted records: produced before the writes that pass their records (at least once).
  const dead =
    definition.deadLetterTopics || definition.outputTopics.length > 0
      ? plainOutputs(definition, definition.deadLetterTopics ?? {}, definition.outputTopics, worker.brokers, worker.kafkaSecurity)
      : undefined;
  return {
    forPartition: async (o) => {
      await dead?.ensure(o.topic);
      return (await backend()).forPartition({ topic: o.topic, partition: o.partition, generation: o.generation, committer: o.committer, outputs: dead?.producer });
    },
    close: async () => {
      await dead?.close();
      if (started) await (await started.catch(() => undefined))?.close();
    },
  };
}

/** A plain producer of dead letters and emitted records for a backend without Kafka transactions (Cassandra). */
function plainOutputs(
  definition: Pick<FlowDefinition<unknown, unknown>, 'name'>,
  topics: Readonly<Record<string, string>>,
  outputTopics: readonly string[],
  brokers: string[],
  security: KafkaSecurity | undefined,
) {
  const client = createKafkaClient({ brokers, clientId: `kafka-flow-temporal-${definition.name}-outputs`, security });
  const admin = new KafkaAdmin(client);
  const outputs = new OutputTopics(admin);
  const ensureOutput = (topic: string, partitions: number) => outputs.ensure(topic, partitions);
  const writer = new PlainWriter({ client });
  return {
    producer: new OutputProducer(outputs, writer),
    async ensure(inputTopic: string) {
      const wanted = [...(topics[inputTopic] ? [topics[inputTopic]] : []), ...outputTopics];
      if (wanted.length === 0) return;
      const input = await admin.describeTopic(inputTopic);
      for (const topic of wanted) await ensureOutput(topic, input?.partitions ?? 1);
    },
    async close() {
      await writer.close().catch(() => undefined);
      await admin.close().catch(() => undefined);
    },
  };
}

export function createBackend<S, V>(definition: FlowDefinition<S, V>, worker: WorkerContext): PersistenceBackend<S, V> {
  switch (definition.persistence.backend) {
    case 'memory':
      return memoryBackend(definition);
    case 'kafka':
      return kafkaBackend(definition, worker);
    case 'cassandra':
      return cassandraBackend(definition, worker);
  }
}
