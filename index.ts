// The package root: what flow modules and outside code import.
export { ConfigError, KafkaFlowError } from './config/errors';
export { type Clock, ManualClock, systemClock } from './flow/clock';
export type { Codec } from './core/codec/codec';
export { DecodeError } from './core/codec/errors';
export { WithheldMessageError } from './core/redact';
export { jsonCodec } from './core/codec/json';
export type { DecodeFailurePolicy } from './flow/decode-policy';
export { DEAD_LETTER_HEADERS, defaultDeadLetterTopic, type PoisonPolicy, type PoisonReason } from './flow/poison';
export {
  type CassandraPersistenceOptions,
  defineFlow,
  type FlowDefinition,
  type FlowOptions,
  type KafkaPersistenceOptions,
  type MemoryPersistenceOptions,
  type PersistenceOptions,
  type ResolvedPersistence,
} from './define-flow';
export {
  createPartitionFlow,
  type PartitionContext,
} from './flow/create-partition-flow';
export type { Duration } from './core/duration';
export { FoldError, OffsetCommitFailedError, PartitionStateError, PersistFailedError, TimerError } from './flow/errors';
export {
  andThen,
  contramapValue,
  type EmitRecord,
  type FiredTimer,
  type Fold,
  type FoldContext,
  filter,
  handleErrorWith,
  mapState,
  type OnTimer,
  transformState,
} from './flow/fold';
export { type KeyTimer, type KeyTimers, type TimeDomain, TimerArgumentError, type TimerOptions } from './flow/key-timers';
export { type Logger, silentLogger } from './core/logger';
export { FlowMetrics, type PartitionMetrics } from './flow/metrics';
export { OffsetOutOfRangeError } from './flow/offsets';
export { InputOffsetOutOfRangeError } from './workers/runtime/input-offset-range';
export {
  PartitionFlow,
  type PartitionFlowOptions,
  type PersistReason,
  type PersistResult,
} from './flow/partition-flow';
export type { FlowRecord, InputMessage, RecordHeaders } from './flow/record';
export {
  PERSIST_PERIODICALLY_DEFAULTS,
  type PersistPeriodicallyOptions,
  type TimerPolicy,
  type TimersOptions,
  timerPolicy,
  UNLOAD_ORPHANED_DEFAULTS,
  type UnloadOrphanedOptions,
} from './flow/timers';
export { CommitLandedLateError, ProducerEpochLostError, SnapshotWriteConflictError, SnapshotWriteFencedError } from './core/fence-errors';
export type { JournalStore } from './persistence/journal-store';
export type { KeyStore } from './persistence/key-store';
export {
  InMemoryBackend,
  InMemoryJournalStore,
  InMemoryKeyStore,
  InMemoryOffsetCommitter,
  InMemorySnapshotStore,
} from './persistence/memory';
export type { OffsetCommitter } from './persistence/offset-committer';
export type {
  KeyWrite,
  PartitionPersistence,
  RecoveredKey,
  WriteBatch,
  WriteBatchResult,
} from './flow/ports';
export type { SnapshotStore, SnapshotWrite } from './persistence/snapshot-store';
export { StorePartitionPersistence, type StorePartitionPersistenceOptions } from './persistence/store-partition-persistence';
export type { JournalEvent, PersistenceMode, Snapshot, TopicPartition, WriteStatus } from './core/persistence-types';
export { CompressionError, CorruptSnapshotError } from './core/codec/errors';
export { Compressor, withCompression } from './core/codec/compressor';
export { SnapshotCommitTimeoutError } from './kafka/errors';
export { MissingGenerationError, RecoveryReadStalledError, SnapshotTopicMismatchError } from './persistence/kafka/errors';
export { KafkaUnreachableError, TemporalUnreachableError } from './workers/connect/errors';
export { KafkaAuthenticationError, TemporalAuthenticationError } from './workers/connect/auth-errors';
export { CassandraAuthenticationError } from './persistence/cassandra/auth-errors';
export { CassandraWriteRefusedError } from './persistence/cassandra/errors';
export { BrokerTooOldError, TransactionVersionUnavailableError } from './kafka/broker-versions';

// The former names of three error classes, from before every error class name ended in `Error`
// (the same classes, the same codes).
export {
  /** @deprecated renamed SnapshotCommitTimeoutError */
  SnapshotCommitTimeoutError as SnapshotCommitTimeout,
} from './kafka/errors';
export {
  /** @deprecated renamed SnapshotWriteConflictError */
  SnapshotWriteConflictError as SnapshotWriteConflict,
  /** @deprecated renamed SnapshotWriteFencedError */
  SnapshotWriteFencedError as SnapshotWriteFenced,
} from './core/fence-errors';
