/** The Cassandra persistence backend: kafka-flow's tables, LWT-fenced snapshot writes, group-fenced offset commits. */
export { CassandraBackend, type CassandraBackendOptions, type CassandraPartitionOwnership } from './backend';
export {
  ConsumerOffsetCommitter,
  type ConsumerOffsetCommitterOptions,
  type GroupConsumer,
  type MembershipView,
} from './consumer-offset-committer';
export { allBuckets, BUCKETS_COMMENT_PREFIX, bucketsComment, bucketsFromComment, DEFAULT_BUCKETS, keyBucket, MAX_BUCKETS } from './buckets';
export { CassandraBucketMismatchError, CassandraFencingMismatchError, CassandraPersistenceError, CassandraSchemaError, CassandraWriteRefusedError, type UnsettledReason } from './errors';
export { journalPurgeStep, MAX_ROUNDS, type NextStep, nextStep, type StoredVersion, type WriteAttempt } from './fencing';
export { CassandraJournalStore, type CassandraJournalStoreOptions, headersToMap } from './journal-store';
export { CassandraKeyStore, type CassandraKeyStoreOptions, type KeyLister } from './key-store';
export { AdaptiveLimiter, Lanes, Limiter, mapConcurrent, mergeConcurrent } from './limiter';
export { type MigrateSnapshotsOptions, type MigrationReport, migrateSnapshotsToByPartition } from './migrate-layout';
export { CassandraPersistenceMetrics } from './metrics';
export {
  CONSISTENCY_LEVELS,
  type CassandraFlowOptions,
  type ConsistencyLevelName,
  type ConsistencyOverride,
  cassandraFlowOptionsSchema,
  checkLayout,
  DEFAULT_BY_PARTITION_TABLE,
  DEFAULT_KEY_SEGMENTS,
  DEFAULT_KEYSPACE,
  DEFAULT_TABLES,
  type Fencing,
  type ResolvedCassandraOptions,
  resolveCassandraOptions,
  type SerialConsistencyName,
  SNAPSHOT_LAYOUTS,
  type SnapshotLayout,
  type TableRole,
} from './options';
export { CassandraPartitionPersistence, type CassandraPartitionPersistenceOptions, type RecoveryProgress } from './partition-persistence';
export { columnProblems, ensureSchema, type SchemaSettings, schemaCql, snapshotsByPartitionTable, TABLE_SPECS, type TableSpec, tableSpec } from './schema';
export { javaStringHashCode, keySegment, segmentChunks } from './segments';
export { CassandraSession } from './session';
export {
  CassandraSnapshotStore,
  type CassandraSnapshotStoreOptions,
  type Refusal,
  type SnapshotStoreStats,
} from './snapshot-store';
