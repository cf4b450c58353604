/**
 * The Kafka backend's options: the zod schema `defineFlow` validates a flow's
 * `persistence: { backend: 'kafka', ... }` with, and their resolution (defaults, units). No
 * kafkajs import here: `define-flow.ts` loads this module.
 */
import { z } from 'zod';
import { type Duration, durationSchema, toMillis } from '../../core/duration';

/**
 * 2,048 (was 256, kafka-flow's): a persist of a partition with ≈ 1,700 dirty keys took 7
 * transactions, each a few round trips that wait for the event loop between slices of folding —
 * 2.1 s (median) per persist under full load, 0.29 s as one transaction (bench:throughput, see
 * docs/experiments/2026-12-02-throughput-persist-cadence.md). Still bounds a transaction's bytes (≈ cap × snapshot size; 20 MB at 10 KiB).
 */
export const DEFAULT_MAX_WRITES_PER_TRANSACTION = 2048;

export interface KafkaPersistenceOptions {
  backend: 'kafka';
  /** Snapshots in a compacted topic; 'none' makes the flow transient. Default 'snapshots'. */
  mode?: 'snapshots' | 'none';
  /**
   * Snapshot writes and the input-offset commit in one transaction per partition, fenced against
   * stale owners. Default true; false is the caching mode (plain producer, no fencing).
   */
  transactional?: boolean;
  /** Group-commit cap: the most snapshot writes in one transaction. Default 2,048. */
  maxWritesPerTransaction?: number;
  /** A recovery read without progress for this long fails. Default 3 min. */
  recoveryStallTimeout?: Duration;
  /** The compacted snapshot topic. Default chosen by the backend. */
  snapshotTopic?: string;
  /** Snapshots of at least this many bytes are compressed. Default 10000. */
  compressionThreshold?: number;
  /** Partition p's producer is `<prefix>-snapshot-<p>`; unique per flow. Default `<groupId>-<name>`. */
  transactionalIdPrefix?: string;
  /** Replication factor of the snapshot topic when it is created. Default 1 (use 3 in production). */
  replicationFactor?: number;
  /**
   * A local state store per partition under `dir` (like Kafka Streams' state.dir), so a restart or a
   * partition coming back reads only the snapshots written after its checkpoint. Either mode
   * (caching: the checkpoint holds where another writer's records come between ours). Default off;
   * the worker's `KFT_STATE_DIR` turns it on (and overrides `dir`). See docs/local-state.md.
   */
  localState?: { dir: string };
  [option: string]: unknown;
}

/** KafkaPersistenceOptions with defaults filled in and durations in milliseconds. */
export interface ResolvedKafkaPersistence {
  backend: 'kafka';
  mode: 'snapshots' | 'none';
  transactional: boolean;
  maxWritesPerTransaction: number;
  recoveryStallTimeoutMs: number;
  snapshotTopic: string | undefined;
  compressionThreshold: number;
  /** The local state store (docs/local-state.md); undefined: off. */
  localState?: { readonly dir: string };
  options: Readonly<Record<string, unknown>>;
}

export const kafkaPersistenceSchema = z.looseObject({
  backend: z.literal('kafka'),
  mode: z.enum(['snapshots', 'none']).optional(),
  transactional: z.boolean().optional(),
  maxWritesPerTransaction: z.number().int().positive().optional(),
  recoveryStallTimeout: durationSchema.optional(),
  snapshotTopic: z.string().min(1).optional(),
  compressionThreshold: z.number().int().nonnegative().optional(),
  transactionalIdPrefix: z.string().min(1).optional(),
  replicationFactor: z.number().int().positive().optional(),
  localState: z.strictObject({ dir: z.string().min(1) }).optional(),
});

export function resolveKafkaPersistence(p: KafkaPersistenceOptions): ResolvedKafkaPersistence {
  const { backend, mode, transactional, maxWritesPerTransaction, recoveryStallTimeout, snapshotTopic, compressionThreshold, localState, ...rest } = p;
  return {
    backend,
    mode: mode ?? 'snapshots',
    transactional: transactional ?? true,
    maxWritesPerTransaction: maxWritesPerTransaction ?? DEFAULT_MAX_WRITES_PER_TRANSACTION,
    recoveryStallTimeoutMs: toMillis(recoveryStallTimeout ?? 180_000, 'persistence.recoveryStallTimeout'),
    snapshotTopic,
    compressionThreshold: compressionThreshold ?? 10_000,
    ...(localState ? { localState: { dir: localState.dir } } : {}),
    options: rest,
  };
}
