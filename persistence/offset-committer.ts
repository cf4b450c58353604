import type { TopicPartition } from '../core/persistence-types';

/**
 * Commits the input partition's offset (the next offset to consume, as Kafka expects). A
 * transactional backend does not use one on its own: it commits inside the transaction that
 * carries the writes (see PartitionPersistence).
 */
export interface OffsetCommitter {
  commit(partition: TopicPartition, offset: number): Promise<void>;
}
