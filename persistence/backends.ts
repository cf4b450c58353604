/**
 * A flow's persistence backend in a worker process: what the worker (and `inspect`) asks of one,
 * and `createBackend`, which builds the flow's through its descriptor (persistence/descriptors.ts).
 */
import type { KafkaSecurity } from '../config/security';
import type { Codec } from '../core/codec/codec';
import type { MetricsRegistry } from '../core/codec/compressor-counters';
import type { Logger } from '../core/logger';
import type { TopicPartition } from '../core/persistence-types';
import type { PartitionPersistence } from '../flow/ports';
import type { ResolvedBackendOptions } from './descriptor';
import { descriptorOf, type ResolvedPersistence } from './descriptors';
import type { PartitionOwner } from './partition-owner';
import type { TransactionVersion } from '../kafka/transactional-writer';

/** What a backend reads of a defined flow (a FlowDefinition from `defineFlow` is one); `P`: its resolved persistence. */
export interface BackendFlow<V, P extends ResolvedBackendOptions = ResolvedPersistence> {
  readonly name: string;
  readonly groupId: string;
  readonly topics: readonly string[];
  readonly persistence: P;
  readonly valueCodec: Codec<V>;
  /** The dead-letter topic of each input topic, when a policy dead-letters (else undefined). */
  readonly deadLetterTopics: Readonly<Record<string, string>> | undefined;
  /** The topics the fold may emit to (empty: it emits nothing). */
  readonly outputTopics: readonly string[];
}

/** A standby copy a worker keeps of a partition another worker owns. */
export interface StandbyCopy {
  readonly topic: string;
  readonly partition: number;
  /** Its local checkpoint (snapshot-partition offset), once it has one. */
  readonly checkpoint?: string;
  /** Snapshot-partition offsets between the checkpoint and the log end when its last round started. */
  readonly lag?: number;
}

/** A flow's persistence backend in a worker process. */
export interface PersistenceBackend<S, V> {
  /** The partition's persistence for its owner; a fencing backend fences the partition's earlier owners before it returns. */
  forPartition(owner: PartitionOwner): Promise<PartitionPersistence<S, V>>;
  /**
   * Work every partition needs first (the Kafka backend: creating or checking the snapshot
   * topic), started by the worker at start-up so that the first assignment does not wait for it.
   * Never fatal: a failure is logged and `forPartition` does the work again (and reports it).
   */
  prepare?(): Promise<void>;
  /** The partition was revoked for good: close what it held (its transactional producer). */
  release?(partition: TopicPartition): Promise<void>;
  /** The partitions this worker keeps standby copies of, by topic (local state: see docs/local-state.md); others stop. */
  standby?(tasks: Readonly<Record<string, readonly number[]>>): void;
  /** How fresh each local copy is (its checkpoint, a snapshot-partition offset), by topic and partition: the assignor's hints. */
  localCheckpoints?(): Record<string, Record<string, string>>;
  /** The standby copies this worker keeps now, with their lag. */
  standbyStatus?(): StandbyCopy[];
  close(): Promise<void>;
}

/** What a worker (or `inspect`) offers the backend it builds; the settings come parsed from config/env. */
export interface WorkerContext {
  /** `KAFKA_BROKERS`: snapshot topics and dead letters. */
  readonly brokers: string[];
  /** KAFKA_SSL_* / KAFKA_SASL_* (config/security); default plaintext. */
  readonly kafkaSecurity?: KafkaSecurity;
  readonly logger?: Logger;
  /** The process's metrics (the engine's FlowMetrics); backends register theirs on its registry. */
  readonly metrics?: MetricsRegistry;
  /** Honour persistence.localState and `stateDir` (workers; not `inspect`). */
  readonly localState?: boolean;
  /** The worker's `KFT_STATE_DIR`, if set. */
  readonly stateDir?: string;
  /** The worker has a bounded state cache: local state reads keys on demand (never all loaded). */
  readonly keysOnDemand?: boolean;
  /** `KAFKA_TRANSACTION_VERSION`: the snapshot transactions' protocol; default 'auto' (2 where the cluster speaks it). */
  readonly kafkaTransactionVersion?: TransactionVersion;
}

export function createBackend<S, V>(definition: BackendFlow<V>, worker: WorkerContext): PersistenceBackend<S, V> {
  return descriptorOf(definition.persistence.backend).create<S, V>(definition, worker);
}
