import type { TopicPartition } from '../../core/persistence-types';

/** The map key the in-memory stores file a partition under. */
export function partitionKey(p: TopicPartition): string {
  return `${p.topic}\u0000${p.partition}`;
}
