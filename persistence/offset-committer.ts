import type { TopicPartition } from '../core/persistence-types';

/**
 * Commits the input partition's offset (the next offset to consume, as Kafka expects). A
 * transactional backend does not use one on its own: it commits inside the transaction that
 * carries the writes (see PartitionPersistence).
 */
export interface OffsetCommitter {
  /**
   * `metadata`: the commit's metadata string (Kafka keeps it with the offset); Cassandra's local
   * state commits its store's lineage there, so a restore can tell the last commit was its own.
   */
  commit(partition: TopicPartition, offset: number, metadata?: string): Promise<void>;
}

/** A committed offset and the metadata committed with it (null: none). */
export interface CommittedPosition {
  readonly offset: string;
  readonly metadata: string | null;
}
