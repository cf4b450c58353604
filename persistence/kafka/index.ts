/**
 * Kafka snapshot persistence: per-key snapshots in a compacted topic, one partition per input
 * partition; caching mode (plain producer, consumer offset commit) or transactional mode
 * (snapshots + input-offset commit in one transaction per partition, fenced by consumer
 * generation). See docs/kafka-persistence.md.
 */
export {
  CACHING_MAX_WRITES_PER_BATCH,
  DEFAULT_MAX_WRITES_PER_TRANSACTION,
  DEFAULT_RECOVERY_STALL_TIMEOUT_MS,
  type InspectedSnapshot,
  type KafkaPartitionAssignment,
  KafkaSnapshotBackend,
  type KafkaSnapshotBackendOptions,
  type LocalStateOptions,
} from './backend';
export { OutputProducer, OutputTopics } from './dead-letter';
export { diagnoseStall, type StallDiagnosis } from './diagnose';
export {
  MissingGenerationError,
  RecoveryReadStalledError,
  type StallCause,
  type StallObservation,
  SnapshotTopicMismatchError,
} from './errors';
export { KafkaFlowBackend, type KafkaFlowBackendOptions } from './flow-backend';
export { KafkaPartitionPersistence, type KafkaPartitionPersistenceOptions } from './kafka-partition-persistence';
export { CachingSnapshotWriter, type SnapshotSender } from './caching-snapshot-writer';
export { type LocalLoadOutcome, type LocalStateHook, LocalStateManager } from './local-state-manager';
export { SnapshotCache, type SnapshotUpdate } from './snapshot-cache';
export { type RecoveryStats, SnapshotRestorer } from './snapshot-restorer';
export { type PersistenceStats, SnapshotWriter } from './snapshot-writer';
export {
  type GenerationSource,
  type OutcomeProbe,
  type SnapshotTransactions,
  TransactionalSnapshotWriter,
  type WriteGeneration,
} from './transactional-snapshot-writer';
export {
  type LocalCheckpoint,
  type LocalLoad,
  LocalPartitionStore,
  type LocalStateIdentity,
  localStatePath,
} from './local-state';
export { KafkaPersistenceMetrics } from './metrics';
export { readSnapshotPartition, type RecoveryReadResult, type SnapshotLogReader, type StoredSnapshot } from './recovery';
export { RestoreRound, type RestoreRoundSummary } from './restore-round';
export { type SnapshotFormat, snapshotFormat } from './snapshot-format';
export {
  defaultSnapshotTopic,
  defaultTransactionalIdPrefix,
  ensureSnapshotTopic,
  type SnapshotTopicSpec,
  snapshotTopicProblems,
} from './topic';
