import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { Owner, PersistResult, RecoverResult } from '../../activities/types';
import { committedAfter } from '../committed-offset';
import { searchAttributes } from '../search-attributes';
import type { Carried, Counters, OwnerRecord, PartitionStatus, PartitionWorkflowInput, Phase, RetryStatus, RevokeSignal } from './contract';
import { type Limits, limitsOf } from './limits';

/** The patched branches a run takes (each asked once, first thing: see partition-workflow.ts). */
export interface Patches {
  readonly sameCommands: boolean;
  readonly retryPerOwner: boolean;
  readonly inOrder: boolean;
  readonly foldWithRecovery: boolean;
  /** Asked only when a persist's result is behind the shown committed offset (MONOTONIC_COMMITTED_PATCH). */
  readonly keepCommitted: () => boolean;
}

/**
 * What a partition workflow knows and carries across continue-as-new: its owner and phase, the
 * assignments and revokes not acted on yet, the last persist and recovery, the retry, and the
 * counters. The steps and the signal handlers change it; the `status` query reads it.
 */
export class PartitionState {
  owner: Owner | undefined;
  phase: Phase;
  readonly ownerHistory: OwnerRecord[];
  committedOffset: string | undefined;
  lastPersist: PersistResult | undefined;
  lastRecovery: RecoverResult | undefined;
  retry: RetryStatus | undefined;
  lastError: string | undefined;
  readonly counters: Counters;
  /** Without `inOrder`: the newest assignment seen (`owner` catches up with it) and the last revoke. */
  latest: Owner | undefined;
  revokedGeneration = -1;
  revokedReason: RevokeSignal['reason'] = 'revoke';
  /** With `inOrder`: the assignments not taken up yet, oldest first, and the revokes by generation. */
  readonly pending: Owner[];
  readonly revokes: Map<number, RevokeSignal['reason']>;
  /** Names this run's recoveries for the fold loops scheduled with them. */
  recoveries = 0;
  readonly limits: Limits;

  constructor(
    readonly input: PartitionWorkflowInput,
    readonly patches: Patches,
  ) {
    const c = input.carried;
    this.limits = limitsOf(input.limits, patches.retryPerOwner);
    this.owner = c?.owner;
    this.phase = c?.phase ?? 'unassigned';
    this.ownerHistory = c?.ownerHistory ?? [];
    this.committedOffset = c?.committedOffset;
    this.lastPersist = c?.lastPersist;
    this.lastRecovery = c?.lastRecovery;
    this.retry = c?.retry;
    this.lastError = this.retry?.lastError;
    this.counters = c?.counters ?? { persists: 0, fences: 0, recoveries: 0, ownerLosses: 0, persistFailures: 0, runs: 0 };
    this.counters.runs++;
    this.latest = this.owner;
    this.pending = c?.pending ? [...c.pending] : [];
    this.revokes = new Map((c?.revoked ?? []).map((r) => [r.generation, r.reason]));
  }

  /** Past maxHistoryEvents, or Temporal suggests continuing as new. */
  historyFull(): boolean {
    return workflowInfo().historyLength > this.limits.maxHistoryEvents || workflowInfo().continueAsNewSuggested;
  }

  /** An assignment newer than the owner is waiting to be taken up. */
  newerAssignment(): boolean {
    if (this.patches.inOrder) return this.pending.length > 0;
    return this.latest !== undefined && (this.owner === undefined || this.latest.generation > this.owner.generation);
  }

  isRevoked(generation: number): boolean {
    return this.patches.inOrder ? this.revokes.has(generation) : this.revokedGeneration === generation;
  }

  /** `idle` when the owner of `generation` left the group (shutdown), else `revoked`. */
  revokedPhase(generation?: number): Phase {
    const reason = this.patches.inOrder && generation !== undefined ? this.revokes.get(generation) : this.revokedReason;
    return reason === 'shutdown' ? 'idle' : 'revoked';
  }

  /** Enters `phase` and shows it, with the owner, in the search attributes. */
  setPhase(phase: Phase): void {
    this.phase = phase;
    upsertSearchAttributes([
      { key: searchAttributes.phase, value: phase },
      { key: searchAttributes.generation, value: this.owner?.generation ?? -1 },
      { key: searchAttributes.owner, value: this.owner?.memberId ?? '' },
    ]);
  }

  /** A persist the owner reported (the fold loop's report, or the flush on revoke). */
  recordPersist(persisted: PersistResult): void {
    this.lastPersist = persisted;
    this.committedOffset = committedAfter(this.committedOffset, persisted.committedOffset, this.patches.keepCommitted);
    this.counters.persists++;
    // Counters only (no commands): runs recorded before them replay the same.
    if (persisted.deadLetters) this.counters.deadLetters = (this.counters.deadLetters ?? 0) + persisted.deadLetters;
    if (persisted.outputs) this.counters.outputs = (this.counters.outputs ?? 0) + persisted.outputs;
  }

  recordRecovery(recovered: RecoverResult): void {
    this.lastRecovery = recovered;
    this.counters.recoveries++;
    this.committedOffset = recovered.committedOffset ?? this.committedOffset;
  }

  /** What the next run starts from: continue-as-new's input. */
  carried(): Carried {
    const { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry } = this;
    return { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry, ...this.unhandled() };
  }

  /** The `status` query's answer. */
  status(): PartitionStatus {
    const { flow, topic, partition, persistEveryMs } = this.input;
    const { phase, owner, ownerHistory, committedOffset, lastPersist, lastRecovery, lastError, retry, counters } = this;
    return {
      flow,
      topic,
      partition,
      phase,
      owner,
      ownerHistory,
      committedOffset,
      logEndOffset: lastPersist?.logEndOffset,
      lag: lastPersist?.lag,
      liveKeys: lastPersist?.liveKeys,
      lastPersist,
      lastRecovery,
      lastError,
      retry,
      counters,
      persistEveryMs,
    };
  }

  /** The signals not acted on yet (kept only with `inOrder`). */
  private unhandled(): Pick<Carried, 'pending' | 'revoked'> {
    if (!this.patches.inOrder) return {};
    return { pending: [...this.pending], revoked: [...this.revokes].map(([generation, reason]) => ({ generation, reason })) };
  }
}
