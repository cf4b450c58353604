import type { OutputRecord, TopicPartition } from '../core/persistence-types';

/** Produces a write's outputs (dead letters) for backends without a transaction spanning them. */
export interface OutputSender {
  send(outputs: readonly OutputRecord[], from: TopicPartition): Promise<void>;
}
