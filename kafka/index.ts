/** The project's narrow Kafka port. Nothing outside `kafka/` imports kafkajs. */
export { type TopicSpec, KafkaAdmin } from './admin';
export { brokersFromEnv, createKafkaClient, DEFAULT_BROKERS, type KafkaClient, type KafkaClientOptions } from './client';
export { type CommittedOffsetsOptions, CommittedOffsets } from './committedOffsets';
export {
  type FenceReason,
  fenceReason,
  isFence,
  PartitionReadStalled,
  SnapshotCommitTimeout,
  SnapshotWriteFenced,
} from './errors';
export { type GroupGeneration, GroupMembership } from './groupMembership';
export { PartitionReader, type ReadOptions, type ReadRecord, type ReadResult, type StallInfo } from './partitionReader';
export { type RevokedPartitions, type RevokeHandler, withRevokePoint } from './revokePoint';
export {
  type CommitRequest,
  type OffsetToCommit,
  type SnapshotMessage,
  snapshotTransactionalId,
  TransactionalWriter,
  type TransactionalWriterOptions,
  type WriteGeneration,
} from './transactionalWriter';
