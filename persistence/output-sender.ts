import type { PendingOutput } from '../core/emitted-outputs';
import type { TopicPartition } from '../core/persistence-types';

/** Produces a write's outputs (dead letters) for backends without a transaction spanning them. */
export interface OutputSender {
  send(outputs: readonly PendingOutput[], from: TopicPartition): Promise<void>;
}
