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
import type { WriteGeneration } from './kafka/transactional-snapshot-writer';
import type { OffsetCommitter } from './offset-committer';

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
  /**
   * The group's committed offset for this partition, as the worker reads it (a stable read started
   * at assignment, overlapping the fence); called after the backend has fenced. A backend that
   * seeds its transactions with the committed offset uses it instead of reading it again.
   */
  readonly committedOffset?: () => Promise<string | undefined>;
}

/** A flow's persistence backend in a worker process. */
export interface PersistenceBackend<S, V> {
  forPartition(ownership: PartitionOwnership): Promise<PartitionPersistence<S, V>>;
  /**
   * Work every partition needs first (the Kafka backend: creating or checking the snapshot
   * topic), started by the worker at start-up so that the first assignment does not wait for it.
   * Never fatal: a failure is logged and `forPartition` does the work again (and reports it).
   */
  prepare?(): Promise<void>;
  /** The partition was revoked for good: close what it held (its transactional producer). */
  release?(partition: TopicPartition): Promise<void>;
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
}

export function createBackend<S, V>(definition: BackendFlow<V>, worker: WorkerContext): PersistenceBackend<S, V> {
  return descriptorOf(definition.persistence.backend).create<S, V>(definition, worker);
}
