import type { Logger } from '../../core/logger';
import type { TopicPartition } from '../../core/persistence-types';
import type { KafkaPersistenceMetrics } from './metrics';

/**
 * Which partition a part of KafkaPartitionPersistence works on and where it reports — shared by
 * the writers, the restorer and the local state manager.
 */
export interface PartitionScope {
  readonly flow: string;
  /** The input partition; its snapshots are in the same partition of the snapshot topic. */
  readonly input: TopicPartition;
  readonly snapshotTopic: string;
  readonly log: Logger;
  readonly metrics?: KafkaPersistenceMetrics;
}

/** The metrics labels of the partition. */
export function scopeLabels(s: PartitionScope): { flow: string; topic: string; partition: string } {
  return { flow: s.flow, topic: s.input.topic, partition: String(s.input.partition) };
}

/** The log fields of the partition. */
export function scopeFields(s: PartitionScope) {
  return { flow: s.flow, topic: s.input.topic, partition: s.input.partition, snapshotTopic: s.snapshotTopic };
}
