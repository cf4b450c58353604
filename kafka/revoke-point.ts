/**
 * The awaited revoke point: the (patched) kafkajs consumer option `onPartitionsRevoked` runs after
 * in-flight `eachBatch` calls finished and before the member rejoins (or leaves), with the
 * generation it is giving up, so a flushOnRevoke commits under the old generation. kafkajs logs
 * (does not raise) a failing hook, and nothing heartbeats while it runs: keep it within the
 * session timeout.
 */
import type { ConsumerConfig } from 'kafkajs';

export interface RevokedPartitions {
  groupId: string;
  generationId: number;
  memberId: string;
  /** 'rebalance' before a rejoin, 'leave' before leaving the group (stop, disconnect). */
  reason: 'rebalance' | 'leave';
  /** Cooperative: part of the assignment, given up after the sync of `generationId` (which gives it to no one). */
  incremental?: boolean;
  /** Cooperative: what the member owned when the group went on without it (forgotten, or the group turned eager): nothing of it can commit. */
  lost?: boolean;
  assignment: Array<{ topic: string; partitions: number[] }>;
}

export type RevokeHandler = (revoked: RevokedPartitions) => Promise<void>;

/** Consumer config with the revoke point set. */
export function withRevokePoint(config: ConsumerConfig, onRevoke: RevokeHandler): ConsumerConfig {
  return { ...config, onPartitionsRevoked: (event) => onRevoke(event) };
}
