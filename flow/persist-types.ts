import type { PersistenceMode } from '../core/persistence-types';
import type { Logger } from '../core/logger';
import type { Clock } from './clock';
import type { PartitionMetrics } from './metrics';
import type { PartitionKeys } from './partition-keys';
import type { PendingOutputs } from './pending-outputs';
import type { PartitionPersistence } from './ports';
import type { TimerPolicy } from './timers';

/**
 * Why a persist runs. `periodic`: the keys whose timers are due (every persistEvery, timed by the
 * owning process's persist cadence, workers/runtime/persist-cadence.ts).
 * `outputs`: the keys with pending outputs (emitted records, dead letters), at least every
 * `outputEvery` (the owning process's flush, see docs/design.md); fails like `periodic`.
 * `idle`: every dirty key, at once — the partition has caught up with its log end (the owning
 * process's idle flush, see docs/design.md); fails like `periodic`; a transient flow writes
 * nothing and lets its commit pass nothing (as `periodic`).
 * `takeover`: every dirty key, once, right after the first batch a recovered partition folded — the
 * new owner's first commit (the owning process's persist cadence); fails and treats a transient
 * flow like `idle`.
 * `revoke`: every dirty key if a timer asked for flushOnRevoke, otherwise only pending deletes.
 * `shutdown`: every dirty key ("persist now"). Revoke and shutdown never throw for a failed write:
 * the failure is counted and the keys concerned keep holding their offsets.
 */
export type PersistReason = 'periodic' | 'outputs' | 'idle' | 'takeover' | 'revoke' | 'shutdown';

export interface PersistResult {
  /** The offset committed by this run, if it committed one. */
  readonly committed: number | undefined;
  /** Key writes that landed (snapshots, journals, delete markers and purges). */
  readonly written: number;
  /** Of those, delete markers and purges. */
  readonly deleted?: number;
  /** Dead letters that landed with these writes. */
  readonly deadLetters?: number;
  /** Emitted records (ctx.emit) that landed with these writes. */
  readonly outputs?: number;
  /** Key writes that failed or were refused. */
  readonly failed: number;
  /** Keys unloaded from memory. */
  readonly evicted: number;
  /** This owner was fenced: the partition is stopped. */
  readonly fenced: boolean;
}

/** What the stages of a persist (plan, writes, error policy and commit) share: the partition PartitionPersister persists. */
export interface PersistScope<S, V> {
  readonly topic: string;
  readonly partition: number;
  readonly persistence: PartitionPersistence<S, V>;
  readonly mode: PersistenceMode;
  /** The mode writes snapshots (not only journals). */
  readonly snapshotting: boolean;
  readonly policy: TimerPolicy;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: PartitionMetrics;
  readonly keys: PartitionKeys<S, V>;
  readonly outputs: PendingOutputs;
  /** The last committed offset (at first, the offset at assignment); moved by each chunk whose commit landed. */
  committed: number;
}

/** Persists that run on a timer or trigger of the owner (persistEvery, outputEvery, the idle flush) and fail the partition when strict. */
export function timed(reason: PersistReason): boolean {
  return reason === 'periodic' || reason === 'outputs' || reason === 'idle' || reason === 'takeover';
}
