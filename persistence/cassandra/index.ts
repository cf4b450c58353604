/** The Cassandra persistence backend: kafka-flow's tables, LWT-fenced snapshot writes, group-fenced offset commits. */
export { CassandraBackend, type CassandraBackendOptions, type CassandraPartitionOwnership } from './backend';
export {
  ConsumerOffsetCommitter,
  type ConsumerOffsetCommitterOptions,
  type GroupConsumer,
  type MembershipView,
} from './consumer-offset-committer';
export { CassandraPersistenceError, CassandraSchemaError } from './errors';
export { MAX_ROUNDS, type NextStep, nextStep, type StoredVersion, type WriteAttempt } from './fencing';
export { CassandraJournalStore, type CassandraJournalStoreOptions, headersToMap } from './journal-store';
export { CassandraKeyStore, type CassandraKeyStoreOptions, type KeyLister } from './key-store';
export { Limiter, mapConcurrent } from './limiter';
export { CassandraPersistenceMetrics } from './metrics';
export {
  CONSISTENCY_LEVELS,
  type CassandraFlowOptions,
  type ConsistencyLevelName,
  type ConsistencyOverride,
  cassandraFlowOptionsSchema,
  DEFAULT_KEY_SEGMENTS,
  DEFAULT_KEYSPACE,
  DEFAULT_TABLES,
  type Fencing,
  type ResolvedCassandraOptions,
  resolveCassandraOptions,
  type SerialConsistencyName,
  type TableRole,
} from './options';
export { CassandraPartitionPersistence, type CassandraPartitionPersistenceOptions, type RecoveryProgress } from './partition-persistence';
export { columnProblems, ensureSchema, schemaCql, TABLE_SPECS, type TableSpec } from './schema';
export { javaStringHashCode, keySegment, segmentChunks } from './segments';
export { CassandraSession } from './session';
export {
  CassandraSnapshotStore,
  type CassandraSnapshotStoreOptions,
  type Refusal,
  type SnapshotStoreStats,
} from './snapshot-store';
