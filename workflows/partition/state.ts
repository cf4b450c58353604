import type { SearchAttributeUpdatePair } from '@temporalio/common';
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { Owner, PersistResult, RecoverResult } from '../../activities/types';
import { committedAfter } from '../committed-offset';
import { searchAttributes } from '../search-attributes';
import { coarse, renderDetails } from './console';
import type { Carried, Counters, OwnerRecord, PartitionStatus, PartitionWorkflowInput, Phase, RestoringSignal, RetryStatus, RevokeSignal } from './contract';
import { type Limits, limitsOf } from './limits';

/** The patched branches a run takes (each asked once, first thing: see partition-workflow.ts). */
export interface Patches {
  readonly sameCommands: boolean;
  readonly retryPerOwner: boolean;
  readonly inOrder: boolean;
  readonly foldWithRecovery: boolean;
  /** OPERATOR_CONSOLE_PATCH: search attributes upserted only when changed, lag and keys, `unowned`. */
  readonly console: boolean;
  /** CARRY_OVER_OWNERLESS_PATCH: continue as new between owners past carryOverOwnerlessEvents. */
  readonly carryOverOwnerless: boolean;
  /** CARRY_OVER_AFTER_REBALANCE_PATCH: after a revoke (or fence), the next assignment first, then carry over if none came. */
  readonly nextOwnerFirst: boolean;
  /** Asked only when a persist's result is behind the shown committed offset (MONOTONIC_COMMITTED_PATCH). */
  readonly keepCommitted: () => boolean;
}

/** The phases in which nobody runs the partition and no owner is being retried: a run may carry over there. */
const BETWEEN_OWNERS: ReadonlySet<Phase> = new Set<Phase>(['idle', 'revoked', 'fenced', 'unowned']);

/** The phases in which nobody owns the partition: past unownedAfterMs in one of them, it shows `unowned`. */
const OWNERLESS: ReadonlySet<Phase> = new Set<Phase>(['idle', 'revoked', 'fenced', 'owner-lost']);

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
  /** The running recovery's last progress report (cleared when the phase changes). */
  restoring: RestoringSignal | undefined;
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
  /** When the phase was entered (this run; workflow time), for the details panel. */
  phaseAt: number | undefined;
  /** With `console`: since when the partition has had no live owner, and the phase `unowned` was entered from. */
  ownerGoneAt: number | undefined;
  unownedFrom: Phase | undefined;
  /** `retire` was signalled: the run ends. */
  retired = false;
  /** With `console`: the search attributes' values as last upserted (only changes are upserted). */
  private readonly shown = new Map<string, unknown>();

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
    this.ownerGoneAt = c?.ownerGoneAt;
    this.unownedFrom = c?.unownedFrom;
    if (patches.console) {
      // A run continued as new starts with its predecessor's search attributes.
      const sa = workflowInfo().typedSearchAttributes;
      for (const key of [searchAttributes.phase, searchAttributes.generation, searchAttributes.owner, searchAttributes.lag, searchAttributes.keys]) {
        this.shown.set(key.name, sa.get(key as never));
      }
    }
    this.showDetails();
  }

  /** Past maxHistoryEvents, or Temporal suggests continuing as new. */
  historyFull(): boolean {
    return workflowInfo().historyLength > this.limits.maxHistoryEvents || workflowInfo().continueAsNewSuggested;
  }

  /**
   * Between owners with more than carryOverOwnerlessEvents in the history: the worker that
   * processes this task has the run cached, while the next owner's worker would have to replay it
   * all before its first task (≈ 1 ms per event: seconds for a restart of many partitions).
   */
  carryOverDue(): boolean {
    if (!this.patches.carryOverOwnerless || !BETWEEN_OWNERS.has(this.phase)) return false;
    if (this.phase === 'unowned' && this.unownedFrom === 'owner-lost') return false; // its owner is still retried
    return workflowInfo().historyLength > this.limits.carryOverOwnerlessEvents;
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
    if (phase !== this.phase) this.phaseAt = Date.now();
    this.phase = phase;
    this.restoring = undefined;
    const shown: SearchAttributeUpdatePair[] = [
      { key: searchAttributes.phase, value: phase },
      { key: searchAttributes.generation, value: this.owner?.generation ?? -1 },
      { key: searchAttributes.owner, value: this.owner?.memberId ?? '' },
    ];
    if (this.patches.console) {
      this.noteOwnerPresence(phase);
      this.show(shown);
    } else {
      upsertSearchAttributes(shown);
    }
    this.showDetails();
  }

  /** With `console`: a partition without a live owner since ownerGoneAt; running or retrying on its owner, it has one. */
  private noteOwnerPresence(phase: Phase): void {
    if (phase === 'running' || phase === 'retrying') this.ownerTakenUp();
    else if (OWNERLESS.has(phase)) this.ownerGoneAt ??= Date.now();
  }

  /** With `console`: a live owner has the partition (it was just assigned, or runs it). */
  ownerTakenUp(): void {
    this.ownerGoneAt = undefined;
    this.unownedFrom = undefined;
  }

  /** With `console`: no live owner for unownedAfterMs. */
  unownedDue(): boolean {
    return this.patches.console && this.ownerGoneAt !== undefined && Date.now() - this.ownerGoneAt >= this.limits.unownedAfterMs;
  }

  /** Shows `unowned`, entered from `from` (a lost owner is still tried again: `waitingAs`). */
  becomeUnowned(from: Phase): void {
    if (this.phase !== 'unowned') this.unownedFrom = from;
    this.setPhase('unowned');
  }

  /** The owner was lost (an activity timed out, or its fold loop ended): `owner-lost`, or `unowned` once that has lasted long enough. */
  ownerLost(): void {
    if (this.patches.console && (this.phase === 'unowned' || this.unownedDue())) this.becomeUnowned('owner-lost');
    else this.setPhase('owner-lost');
  }

  /** The phase whose wait applies: `unowned` waits as the phase it was entered from. */
  waitingAs(): Phase {
    return this.phase === 'unowned' ? (this.unownedFrom ?? 'idle') : this.phase;
  }

  /** With `console`: the partition's key count and lag (when known), coarse, in the search attributes when they changed. */
  showLoad(liveKeys: number, lag: number | undefined): void {
    if (!this.patches.console) return;
    const load: SearchAttributeUpdatePair[] = [{ key: searchAttributes.keys, value: coarse(liveKeys) }];
    if (lag !== undefined) load.push({ key: searchAttributes.lag, value: coarse(lag) });
    this.show(load);
  }

  /** Upserts those of `pairs` whose values differ from what the search attributes show. */
  private show(pairs: SearchAttributeUpdatePair[]): void {
    const changed = pairs.filter((p) => this.shown.get(p.key.name) !== p.value);
    if (changed.length === 0) return;
    for (const p of changed) this.shown.set(p.key.name, p.value);
    upsertSearchAttributes(changed);
  }

  /** The workflow page's current-details panel (no command: the UI reads it through a query). */
  showDetails(): void {
    setCurrentDetails(renderDetails(this));
  }

  /** A persist the owner reported (the fold loop's report, or the flush on revoke). */
  recordPersist(persisted: PersistResult): void {
    this.lastPersist = persisted;
    this.committedOffset = committedAfter(this.committedOffset, persisted.committedOffset, this.patches.keepCommitted);
    this.counters.persists++;
    // Counters only (no commands): runs recorded before them replay the same.
    if (persisted.deadLetters) this.counters.deadLetters = (this.counters.deadLetters ?? 0) + persisted.deadLetters;
    if (persisted.outputs) this.counters.outputs = (this.counters.outputs ?? 0) + persisted.outputs;
    this.showDetails();
  }

  recordRecovery(recovered: RecoverResult): void {
    this.lastRecovery = recovered;
    this.counters.recoveries++;
    this.committedOffset = recovered.committedOffset ?? this.committedOffset;
    this.showDetails();
  }

  /** What the next run starts from: continue-as-new's input. */
  carried(): Carried {
    const { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry, ownerGoneAt, unownedFrom } = this;
    return { owner, phase, ownerHistory, committedOffset, counters, lastPersist, lastRecovery, retry, ownerGoneAt, unownedFrom, ...this.unhandled() };
  }

  /** The `status` query's answer. */
  status(): PartitionStatus {
    const { flow, topic, partition, persistEveryMs } = this.input;
    const { phase, owner, ownerHistory, committedOffset, lastPersist, lastRecovery, restoring, lastError, retry, counters } = this;
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
      ...(restoring ? { restoring } : {}),
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
