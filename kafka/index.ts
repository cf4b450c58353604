/** The project's narrow Kafka port. Nothing outside `kafka/` imports kafkajs. */
export { KafkaAdmin, type TopicDescription, type TopicSpec } from './admin';
export { createKafkaClient, type KafkaClient, type KafkaClientOptions } from './client';
export { type CommittedOffsetsOptions, CommittedOffsets } from './committed-offsets';
export {
  commitFailureOutcome,
  type FenceReason,
  fenceReason,
  PartitionReadStalledError,
  protocolErrorType,
  type SentRecords,
  SnapshotCommitTimeoutError,
  SnapshotWriteFencedError,
} from './errors';
export { decodeFetchResponse } from './fetch-decoder';
export { type GroupGeneration, GroupMembership, newlyAssigned, ownershipGeneration, withHeldSince } from './group-membership';
export { type PlainMessage, PlainWriter, type PlainWriterOptions } from './plain-writer';
export { PartitionReader, type ReadOptions, type ReadRecord, type ReadResult, type StallInfo } from './partition-reader';
export { type RevokedPartitions, type RevokeHandler, withRevokePoint } from './revoke-point';
export { chunkByBytes, DEFAULT_MAX_REQUEST_BYTES } from './request-size';
export {
  type CommitRequest,
  type CommitResult,
  type OffsetToCommit,
  type SnapshotMessage,
  snapshotTransactionalId,
  TransactionalWriter,
  type TransactionalWriterOptions,
  type WriteGeneration,
} from './transactional-writer';
