import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { Owner, PartitionRef, PersistResult, RecoverResult } from '../../activities/types';
import type { Limits } from './limits';

/**
 * What the rest of the project sees of a partition workflow: its input, its signals and query,
 * the status it answers with, and its id.
 */

/**
 * `retrying`: the partition stopped on its owner (a failed persist, fold or recovery) and is
 * recovered again on the same owner after a capped exponential backoff, until it runs or a newer
 * owner comes. `idle`: the owner left the group gracefully and nobody owns the partition yet.
 * `unowned`: no live owner for longer than the flow's consumer session timeout (`idle`, `revoked`,
 * `fenced` or `owner-lost` that long, with no new assignment; a lost owner is still tried again).
 * `retired`: ended by `kafka-flow-temporal retire` (the run's last phase).
 * `failed` is never entered; it stays in the type for runs recorded before `retrying` existed.
 */
export type Phase =
  | 'unassigned'
  | 'recovering'
  | 'running'
  | 'retrying'
  | 'revoked'
  | 'idle'
  | 'fenced'
  | 'owner-lost'
  | 'unowned'
  | 'retired'
  | 'failed';

export interface PartitionWorkflowInput extends PartitionRef {
  readonly persistEveryMs: number;
  /** Overrides of the defaults (DEFAULT_LIMITS; tests use short ones). */
  readonly limits?: Partial<Limits>;
  /** Carried across continueAsNew. */
  readonly carried?: Carried;
}

export interface OwnerRecord extends Owner {
  readonly at: number;
}

export interface Carried {
  readonly owner?: Owner;
  readonly phase: Phase;
  readonly ownerHistory: OwnerRecord[];
  readonly committedOffset?: string;
  readonly counters: Counters;
  readonly lastPersist?: PersistResult;
  readonly lastRecovery?: RecoverResult;
  readonly retry?: RetryStatus;
  /** Assignments not taken up yet, oldest first (runs with ASSIGNMENTS_IN_ORDER_PATCH). */
  readonly pending?: Owner[];
  /** Revokes of assignments, by generation (runs with ASSIGNMENTS_IN_ORDER_PATCH). */
  readonly revoked?: Array<{ generation: number; reason: RevokeSignal['reason'] }>;
  /** Since when (workflow time) the partition has had no live owner (runs with OPERATOR_CONSOLE_PATCH). */
  readonly ownerGoneAt?: number;
  /** The phase `unowned` was entered from (runs with OPERATOR_CONSOLE_PATCH). */
  readonly unownedFrom?: Phase;
}

export interface Counters {
  persists: number;
  fences: number;
  recoveries: number;
  ownerLosses: number;
  /** Failures that stopped the partition on its owner (each followed by a retry). */
  persistFailures: number;
  runs: number;
  /** Recoveries retried on the same owner after a failure. */
  retries?: number;
  /** Records handed to the dead-letter topic (decode or fold failures under the dead-letter policy). */
  deadLetters?: number;
  /** Records the fold emitted (ctx.emit) that landed in their output topics. */
  outputs?: number;
}

/** Where the self-healing retry stands (phase `retrying`, kept until the next successful persist). */
export interface RetryStatus {
  /** Consecutive failed attempts since the partition last persisted successfully. */
  readonly attempt: number;
  readonly lastError: string;
  /** When the next recovery starts (workflow time, ms since the epoch). */
  readonly nextAt: number;
}

export interface RevokeSignal {
  readonly generation: number;
  readonly memberId: string;
  /** What the owner's flush on revoke did, when it flushed (it runs in-process; see docs/design.md). */
  readonly flushed?: PersistResult;
  readonly reason: 'revoke' | 'shutdown';
}

/**
 * How far the owner's recovery of the partition is, sent by the owner while it runs (the first
 * after KFT_RESTORE_REPORT_EVERY_MS, then as often: a short recovery sends none). Shown in the
 * details panel and the status; no command, so it changes no run's commands.
 */
export interface RestoringSignal {
  readonly generation: number;
  readonly memberId: string;
  /** Read so far, in `unit`s ('snapshot records', 'keys'). */
  readonly read: number;
  readonly unit: string;
  /** The share of the read done (0–1), when the backend knows where the read ends. */
  readonly fraction?: number;
  /** When the owner sent it (its clock, ms since the epoch). */
  readonly at: number;
}

export interface PartitionStatus extends PartitionRef {
  readonly phase: Phase;
  readonly owner?: Owner;
  readonly ownerHistory: OwnerRecord[];
  readonly committedOffset?: string;
  readonly logEndOffset?: string;
  readonly lag?: number;
  readonly liveKeys?: number;
  readonly lastPersist?: PersistResult;
  readonly lastRecovery?: RecoverResult;
  /** The running recovery's last progress report (phase `recovering` only). */
  readonly restoring?: RestoringSignal;
  readonly lastError?: string;
  readonly retry?: RetryStatus;
  readonly counters: Counters;
  readonly persistEveryMs: number;
}

export const assignedSignal = defineSignal<[Owner]>('assigned');
export const revokedSignal = defineSignal<[RevokeSignal]>('revoked');
export const restoringSignal = defineSignal<[RestoringSignal]>('restoring');
export const statusQuery = defineQuery<PartitionStatus>('status');
/**
 * Ends the run (`kafka-flow-temporal retire`): its activities are cancelled, the phase becomes
 * `retired` and the workflow completes. A worker that still holds the partition starts a new run
 * (its re-assertion), so the CLI refuses while the flow's workers are alive unless forced.
 */
export const retireSignal = defineSignal('retire');

export const partitionWorkflowId = (p: PartitionRef): string => `kafka-flow/${p.flow}/${p.topic}/${p.partition}`;
