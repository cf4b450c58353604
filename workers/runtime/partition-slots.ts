import { type FoldingHandle, StaleGenerationError } from '../../activities/partition-host';
import type { OwnerRequest } from '../../activities/types';
import { offsetText } from '../../flow/offsets';
import type { PartitionFlow } from '../../flow/partition-flow';
import { type GroupGeneration, ownershipGeneration } from '../../kafka';
import { SnapshotWriteFencedError } from '../../core/fence-errors';
import type { EachBatchPayload } from 'kafkajs';
import type { BatchHandoff } from './batch-handoff';
import type { PersistCadence } from './persist-cadence';

/**
 * A partition's life in one process. `assigned`: joined with it, paused until a workflow recovers
 * and folds it; `running`: a fold loop drives it; `revoked`: a rebalance takes it (its engine is
 * kept in case it comes back); `fenced` / `failed`: stopped here until a recovery.
 */
export type SlotState = 'assigned' | 'running' | 'revoked' | 'fenced' | 'failed';

/** One input partition as this process holds it. */
export interface Slot {
  readonly topic: string;
  readonly partition: number;
  /** The generation under which this process was (last) assigned the partition, and its member id then. */
  generation: number;
  memberId: string;
  state: SlotState;
  /** The engine, once recovered; kept across a revoke in case the partition comes back. */
  flow?: PartitionFlow<unknown, unknown>;
  /** The generation the engine's state was recovered or adopted under. */
  flowGeneration?: number;
  /** The log end the partition's last fetch reported (its high watermark). */
  highWatermark?: number;
  /** Why the partition stopped here (state 'failed'). */
  failure?: unknown;
  /** Which fold-loop activity drives the partition now: a late cancellation of an older one must not pause it. */
  folding?: number;
  /** Where the consumer hands the partition's batches to the fold loop driving it (until that loop ends). */
  handoff?: BatchHandoff<EachBatchPayload>;
  /** Bumped by every full recovery as it starts: only the latest may install its engine. */
  recoverSeq: number;
  /** The recoverSeq whose engine is installed: the in-memory shortcut is safe only while no recovery started since. */
  installedSeq?: number;
  /** The name of the recovery that installed (or kept) the engine, when the workflow named it (a fold loop scheduled with it waits for it). */
  recovery?: string;
  /** The revoke of `generation` was signalled to the workflow (activities of that generation may end). */
  revokeSignalled?: number;
  /** Signalling the revoke of `generation` was given up: its activities need not wait for it. */
  revokeUnsignalled?: number;
  /** Since when this process has held the partition without a fold loop (the reassert watchdog). */
  notFoldingSince?: number;
  /** When the consumer last handed a batch of the partition over, or a fold loop started (the quiet-fetch watchdog). */
  lastBatchAt?: number;
  /** When the installed engine persists periodically and when idle (replaced with the engine). */
  cadence?: PersistCadence;
  /** The batch the consumer has handed to the fold loop and waits on, if one is (a cooperative revoke lets it end first). */
  batchInFlight?: Promise<unknown>;
  /** The in-process `outputs` persist (outputEvery, maxPendingOutputs) running now, if one is. */
  outputsFlush?: Promise<void>;
  /** What the in-process persists landed since the workflow was last told (with the next persist it sees). */
  unreported?: Unreported;
  /**
   * Folding ahead of its workflow (foldAtJoin): the recovery started at the join of this owner
   * installed its engine and folds under a loop of the process's own until the workflow's recover
   * activity takes the recovery over (`taken`) and its fold loop takes the folding over (then this
   * is cleared). No periodic persist runs meanwhile.
   */
  earlyFold?: EarlyFold;
}

/** A partition folding ahead of its workflow (Slot.earlyFold). */
export interface EarlyFold {
  /** The early loop's fold-loop token. */
  readonly token: number;
  /** The recover activity of this owner took the recovery over (what it returned: `result`). */
  taken: boolean;
  /** What the recover activity returns for it. */
  readonly result: { keys: number; snapshotsRead: number; committedOffset: string; local: Record<string, unknown> };
  readonly phases: Record<string, number>;
  /** When it started folding (performance.now()). */
  readonly foldingSince: number;
}

/** What in-process persists (periodic, idle, outputs) landed and the workflow has not been told yet. */
export interface Unreported {
  persistedKeys: number;
  deletedKeys: number;
  outputs: number;
  deadLetters: number;
  /** Time spent persisting. */
  ms: number;
}

const tpKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/**
 * The slots of one flow in one process and the rules on them: which generation an activity may
 * act under, when the in-memory shortcut is safe, what a fold loop and a persist should do now.
 * No I/O: the runtime does the consuming and signalling around it.
 */
export class PartitionSlots {
  private readonly slots = new Map<string, Slot>();
  /** Partitions dropped at a join after their revoke was signalled: that ownership generation, by partition. */
  private readonly revokedAndReleased = new Map<string, number>();
  private foldLoops = 0;

  get(topic: string, partition: number): Slot | undefined {
    return this.slots.get(tpKey(topic, partition));
  }

  all(): IterableIterator<Slot> {
    return this.slots.values();
  }

  /**
   * A join: every newly assigned partition's slot takes the new generation (and becomes `assigned`,
   * unless fenced or failed: those wait for a recovery); a partition kept through a cooperative
   * rebalance keeps its slot as it is (its ownership generation did not change), as does one being
   * revoked (its revoke point follows); slots not assigned any more are dropped and returned (their
   * state and producer go).
   */
  join(g: GroupGeneration): Slot[] {
    const assigned = new Set<string>();
    for (const [topic, partitions] of Object.entries(g.revoking ?? {})) for (const partition of partitions) assigned.add(tpKey(topic, partition));
    for (const [topic, partitions] of Object.entries(g.assignment)) {
      for (const partition of partitions) {
        const key = tpKey(topic, partition);
        assigned.add(key);
        const slot = this.slots.get(key);
        const since = ownershipGeneration(g, topic, partition);
        if (slot && since !== g.generationId && slot.generation === since && slot.memberId === g.memberId) continue; // kept
        if (slot) {
          slot.generation = g.generationId;
          slot.memberId = g.memberId;
          if (slot.state !== 'fenced' && slot.state !== 'failed') slot.state = 'assigned';
          slot.notFoldingSince = Date.now();
        } else {
          this.slots.set(key, { topic, partition, generation: g.generationId, memberId: g.memberId, state: 'assigned', recoverSeq: 0, notFoldingSince: Date.now() });
        }
      }
    }
    const released: Slot[] = [];
    for (const [key, slot] of this.slots) {
      if (assigned.has(key)) {
        this.revokedAndReleased.delete(key);
        continue;
      }
      this.slots.delete(key);
      if (slot.revokeSignalled !== undefined) this.revokedAndReleased.set(key, slot.revokeSignalled);
      released.push(slot);
    }
    return released;
  }

  /**
   * The process holds the slot's partition now under the ownership generation the slot has: the
   * current join's, or an earlier join's of the same member that a cooperative rebalance kept it
   * through (a partition being revoked still counts until its revoke point ends).
   */
  static holds(slot: Slot, current: GroupGeneration | undefined): boolean {
    return current !== undefined && current.memberId === slot.memberId && ownershipGeneration(current, slot.topic, slot.partition) === slot.generation;
  }

  /** The slot an activity's request may act on, or StaleGenerationError (not this process's generation). */
  forRequest(r: OwnerRequest, current: GroupGeneration | undefined): Slot {
    const slot = this.get(r.topic, r.partition);
    const since = ownershipGeneration(current, r.topic, r.partition);
    if (!current || current.memberId !== r.owner.memberId || (since !== undefined && since !== r.owner.generation)) {
      throw new StaleGenerationError(
        `${r.topic}-${r.partition}: scheduled for generation ${r.owner.generation}, this process is at ${since ?? current?.generationId ?? 'none'}`,
      );
    }
    if (since === undefined || !slot || slot.generation !== r.owner.generation) {
      throw new StaleGenerationError(`${r.topic}-${r.partition} is not assigned to this process in generation ${r.owner.generation}`);
    }
    return slot;
  }

  /** The process still holds the slot's partition under the generation its state belongs to (else a fence). */
  static assertHolds(slot: Slot, current: GroupGeneration | undefined): void {
    if (!PartitionSlots.holds(slot, current) || slot.flowGeneration !== slot.generation) {
      throw new SnapshotWriteFencedError(slot.topic, slot.partition, 'this process no longer holds the partition in the current generation');
    }
  }

  /**
   * Same process, next generation, nobody else in between: the engine of `keepFromGeneration` may
   * go on with its in-memory state — unless it stopped, or a recovery started since it was
   * installed (that recovery may have initialized the partition's transactional producer, fencing
   * the engine's own, even if it was then cancelled).
   */
  static canKeep(slot: Slot, keepFromGeneration: number | undefined): boolean {
    return (
      keepFromGeneration !== undefined &&
      slot.flow !== undefined &&
      slot.flowGeneration === keepFromGeneration &&
      slot.flow.failed === undefined &&
      slot.state !== 'failed' &&
      slot.state !== 'fenced' &&
      slot.installedSeq === slot.recoverSeq
    );
  }

  /**
   * A fold loop takes the partition over (from an older one that has not learned of its
   * cancellation yet, after continue-as-new or a retry): `running`, driven by the returned token.
   */
  startFolding(slot: Slot, r: OwnerRequest, stopping: () => boolean): Omit<FoldingHandle, 'foldNext'> {
    if (!slot.flow || slot.flowGeneration !== r.owner.generation) {
      throw new StaleGenerationError(`${r.topic}-${r.partition} was not recovered for generation ${r.owner.generation}`);
    }
    const token = ++this.foldLoops;
    slot.folding = token;
    slot.state = 'running';
    slot.lastBatchAt = Date.now();
    return {
      token,
      poll: () => {
        const flow = slot.flow!;
        const running = slot.state === 'running' && slot.generation === r.owner.generation && slot.folding === token && !stopping();
        return {
          running,
          // A stop marks the process stopping before the consumer leaves and its revoke point
          // runs: the loop waits for that revoke's signal too, else the workflow would see an
          // ended loop first and take it for a lost owner instead of a clean stop.
          settling:
            (slot.state === 'revoked' || (stopping() && slot.state === 'running')) &&
            slot.generation === r.owner.generation &&
            slot.revokeSignalled !== r.owner.generation &&
            slot.revokeUnsignalled !== r.owner.generation,
          failure: slot.state === 'failed' ? (slot.failure ?? flow.failed ?? new Error('partition failed')) : undefined,
          progress: {
            position: offsetText(flow.position),
            committed: offsetText(flow.committedOffset),
            liveKeys: flow.liveKeys,
            highWatermark: slot.highWatermark === undefined ? undefined : offsetText(slot.highWatermark),
          },
        };
      },
    };
  }

  /**
   * A fold loop ended: true when it still drove the partition (which then waits for the next
   * loop). A batch handed to it and not taken goes back to the consumer unfolded.
   */
  stopFolding(r: OwnerRequest, token: number): boolean {
    const slot = this.get(r.topic, r.partition);
    if (!slot || slot.folding !== token) return false;
    slot.handoff?.close();
    slot.handoff = undefined;
    if (slot.generation === r.owner.generation && slot.state === 'running') {
      slot.state = 'assigned';
      return true;
    }
    return false;
  }

  /**
   * What a persist scheduled for `r` should do now: `persist` (the partition runs here), `skip`
   * (it was revoked here and the workflow has been told), `wait` (revoked, not yet signalled), or
   * it throws (failed here, or not this process's generation).
   */
  persistReadiness(r: OwnerRequest, current: GroupGeneration | undefined, stopping: boolean): 'persist' | 'skip' | 'wait' {
    const slot = this.get(r.topic, r.partition);
    if (slot && slot.generation === r.owner.generation && slot.state === 'revoked') {
      return slot.revokeSignalled === r.owner.generation ? 'skip' : 'wait';
    }
    if (stopping && slot?.revokeSignalled === r.owner.generation) return 'skip';
    // Revoked here, signalled, and dropped at the join that followed (a cooperative rebalance's
    // second round comes right after its revoke point): the workflow knows; the report ends quietly.
    if (!slot && this.revokedAndReleased.get(tpKey(r.topic, r.partition)) === r.owner.generation) return 'skip';
    // An older generation's report whose revoke this process has signalled, the partition assigned
    // here again since (kept by an eager rebalance): the workflow knows, so it ends quietly
    // instead of failing as stale — which showed in the history and the worker's log as a fence.
    if (slot && slot.revokeSignalled !== undefined && r.owner.generation <= slot.revokeSignalled && r.owner.generation < slot.generation) return 'skip';
    const s = this.forRequest(r, current);
    if (s.state === 'failed') throw s.failure ?? new Error(`${r.topic}-${r.partition} failed`);
    // Not running yet (the fold loop starts alongside) or any more: persist() decides when due.
    return 'persist';
  }
}
