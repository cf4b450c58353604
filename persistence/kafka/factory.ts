import { createKafkaClient } from '../../kafka/client';
import type { BackendFlow, PersistenceBackend, WorkerContext } from '../backends';
import { memoryBackend } from '../memory/factory';
import { KafkaFlowBackend } from './flow-backend';
import type { WriteGeneration } from './transactional-snapshot-writer';

/**
 * A kafka flow's snapshot backends (one per input topic), for workers and for `inspect`
 * (`readAll({ topic?, partition? })` reads the snapshot topics without a group or a fence).
 */
export function kafkaFlowBackend<S, V>(definition: BackendFlow<V>, worker: WorkerContext): KafkaFlowBackend<S, V> {
  const p = definition.persistence;
  if (p.backend !== 'kafka') throw new TypeError(`flow "${definition.name}" does not persist to Kafka`);
  const extra = p.options as { transactionalIdPrefix?: string; replicationFactor?: number };
  const localState = worker.localState ? localStateOf(definition, worker) : undefined;
  return new KafkaFlowBackend<S, V>({
    // The backend logs (recovery stalls, topics created) and counts (transactions, fences, restores)
    // on the worker's logger and registry: its metrics are on the worker's /metrics.
    ...(localState ? { localState } : {}),
    logger: worker.logger,
    metrics: worker.metrics,
    client: createKafkaClient({ brokers: worker.brokers, clientId: `kafka-flow-temporal-${definition.name}-snapshots`, security: worker.kafkaSecurity, logger: worker.logger }),
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
    transactionVersion: worker.kafkaTransactionVersion,
  });
}

/** persistence.localState, or KFT_STATE_DIR (which turns it on and overrides the dir). */
function localStateOf(definition: Pick<BackendFlow<unknown>, 'name' | 'persistence'>, worker: WorkerContext): { dir: string; onDemand: boolean } | undefined {
  const p = definition.persistence;
  if (p.backend !== 'kafka') return undefined;
  const onDemand = worker.keysOnDemand === true;
  if (worker.stateDir) return { dir: worker.stateDir, onDemand };
  return p.localState ? { dir: p.localState.dir, onDemand } : undefined;
}

/**
 * The `kafka` backend: snapshots in a compacted topic per input topic (see
 * docs/kafka-persistence.md). A transient flow (`mode: 'none'`) persists nothing: it only commits
 * offsets, through the consumer.
 */
export function kafkaBackend<S, V>(definition: BackendFlow<V>, worker: WorkerContext): PersistenceBackend<S, V> {
  if (definition.persistence.mode === 'none') return memoryBackend(definition);
  const backend = kafkaFlowBackend<S, V>(definition, { ...worker, localState: true });
  return {
    // The owner's generation is read for each transaction (a rebalance that keeps the partition
    // still bumps it); caching mode commits through the owner.
    forPartition: (owner) =>
      backend.forPartition({
        topic: owner.topic,
        partition: owner.partition,
        groupId: owner.groupId,
        generation: Object.assign(() => owner.generation(), owner.nextGeneration ? { next: (used: WriteGeneration) => owner.nextGeneration!(used) } : {}),
        committer: owner,
        ...(owner.committedOffset ? { committedOffset: () => owner.committedOffset!() } : {}),
      }),
    release: (tp) => backend.forTopic(tp.topic).release(tp.partition),
    standby: (tasks) => backend.standby(tasks),
    localCheckpoints: () => backend.localCheckpoints(),
    standbyStatus: () => backend.standbyStatus(),
    prepare: () => backend.prepare(),
    close: () => backend.close(),
  };
}
