import { createPartitionFlow } from '../../flow/create-partition-flow';
import type { PartitionFlow } from '../../flow/partition-flow';
import type { PartitionPersistence } from '../../flow/ports';
import type { GroupGeneration } from '../../kafka';
import type { RecoverResult } from '../../activities/types';
import { SlotOwner } from './partition-owner';
import { RESTORE_REPORT_EVERY_MS, reportRestore } from './restore-reports';
import type { Slot } from './partition-slots';
import { RuntimeSide } from './runtime-side';
import { traced } from '../../core/tracing';

/** A recovery's work before it installs its engine in the slot: fenced, committed offset read, state read. */
export interface Prepared {
  persistence: PartitionPersistence<unknown, unknown>;
  flow: PartitionFlow<unknown, unknown>;
  assignedAt: string;
  /** flow.recover()'s outcome: the keys read, or its failure. */
  outcome: { keys: number } | { error: unknown };
  phases: { persistence: number; committed: number; read: number };
  startedAt: number;
}

/** A recovery started at the join, for the workflow's recover activity of that generation to take over. */
interface EarlyRecovery {
  generation: number;
  memberId: string;
  prepared: Promise<Prepared>;
}

/**
 * Installs a recovery started at the join that is done before its activity came, and starts
 * folding the partition (foldAtJoin; HostSide.foldEarly). True when it did: the engine, its
 * producer and its persistence are the slot's from then on. `recoverSeq`: the slot's at the join
 * (a recovery started since has the last word).
 */
export type FoldEarly = (slot: Slot, owner: { generation: number; memberId: string; recoverSeq: number }, prepared: Prepared) => boolean;

/** What a persistence's `lastRecovery` may report (the Kafka backend's RecoveryStats). */
export type RecoveryFigures = Partial<Pick<RecoverResult, 'fromLocal' | 'fromTopic' | 'restore' | 'fullRestoreReason'>> & { records?: number };

export async function closeQuietly(p: PartitionPersistence<unknown, unknown>): Promise<void> {
  try {
    await p.close?.();
  } catch {
    // its producer may already be closed by the newer recovery's backend call
  }
}

/**
 * The recoveries of a flow's partitions before their engines are installed: the work of one
 * (fence, committed offset, state read) and the ones started at a join (recoverAtJoin), kept by
 * slot until the recover activity of that generation takes them over or they are dropped.
 */
export class PartitionRecoveries extends RuntimeSide {
  private readonly early = new Map<Slot, EarlyRecovery>();
  /** Set by the runtime when recoveries done before their activity start folding at once (foldAtJoin). */
  foldEarly: FoldEarly | undefined;

  /**
   * A partition new to this process (no engine here) starts recovering now — fenced, its committed
   * offset and persisted state read — while its workflow is signalled, takes its workflow task and
   * schedules the recovery: at a worker's start the workflow worker is still loading then, so the
   * recovery is done by the time its activity comes, which takes it over (recover). The fence before
   * any read and the generation are those of the join, the same as the activity's; nothing is
   * folded before the workflow's fold loop starts. A partition whose engine is here (the next
   * generation may keep it) waits for its activity, as does one fenced or failed here.
   */
  startAtJoin(g: GroupGeneration): void {
    if (this.stopping) return;
    for (const [topic, partitions] of Object.entries(g.assignment)) {
      for (const partition of partitions) {
        const slot = this.slots.get(topic, partition);
        if (!slot || slot.flow !== undefined || slot.state !== 'assigned') continue;
        this.drop(slot);
        const prepared = this.prepare(slot, { generation: g.generationId, memberId: g.memberId });
        prepared.catch((err) => this.log.debug({ err, topic, partition }, 'the recovery started at the join failed; its activity recovers afresh'));
        const entry: EarlyRecovery = { generation: g.generationId, memberId: g.memberId, prepared };
        this.early.set(slot, entry);
        const owner = { generation: g.generationId, memberId: g.memberId, recoverSeq: slot.recoverSeq };
        if (this.foldEarly) {
          void prepared.then(
            (p) => {
              // Taken over by its activity meanwhile, or dropped: not this one's to install.
              if (this.early.get(slot) !== entry || !('keys' in p.outcome)) return;
              if (this.foldEarly?.(slot, owner, p)) this.early.delete(slot);
            },
            () => undefined,
          );
        }
      }
    }
  }

  /** Drops a recovery started at a join that no activity took over (its producer closed once it is done). */
  drop(slot: Slot): void {
    const early = this.early.get(slot);
    if (!early) return;
    this.early.delete(slot);
    void early.prepared.then((p) => closeQuietly(p.persistence), () => undefined);
  }

  /** The recovery started at the join for this owner, taken over (once); a stale one is dropped. */
  take(slot: Slot, owner: { generation: number; memberId: string }): Promise<Prepared> | undefined {
    const early = this.early.get(slot);
    if (!early) return undefined;
    if (early.generation !== owner.generation || early.memberId !== owner.memberId) {
      this.drop(slot);
      return undefined;
    }
    this.early.delete(slot);
    return early.prepared;
  }

  /** Drops every recovery started at a join (the process is stopping). */
  dropAll(): void {
    for (const slot of [...this.early.keys()]) this.drop(slot);
  }

  /**
   * A full recovery's work, before its engine is installed: fence the partition's persistence
   * under `owner` (the backend fences before it reads anything), read the group's committed
   * offset meanwhile, then the persisted state. A failure of the state read is returned (the
   * caller decides, knowing whether it was superseded); one before that is thrown.
   */
  prepare(slot: Slot, owner: { generation: number; memberId: string }): Promise<Prepared> {
    // One span per recovery (tracing on): fence, committed offset and state read are its children.
    const fields = { flow: this.definition.name, topic: slot.topic, partition: slot.partition, generation: owner.generation };
    return traced('kafka-flow.recovery', fields, async (span) => {
      const prepared = await this.prepareNow(slot, owner);
      if (span) {
        const figures = (prepared.persistence as { lastRecovery?: RecoveryFigures }).lastRecovery;
        const { outcome } = prepared;
        span.set({ offset: prepared.assignedAt, fromTopic: figures?.fromTopic, fromLocal: figures?.fromLocal });
        // A failed state read is returned, not thrown (the caller decides): the span records it.
        if ('keys' in outcome) span.set({ outcome: 'recovered', keys: outcome.keys });
        else span.fail(outcome.error);
      }
      return prepared;
    });
  }

  private async prepareNow(slot: Slot, owner: { generation: number; memberId: string }): Promise<Prepared> {
    const startedAt = performance.now();
    const { topic, partition } = slot;
    // The committed offset is read while the backend fences (SlotOwner); the fence still comes
    // before every read of the snapshots and every write.
    const partitionOwner = new SlotOwner(slot, owner, this.definition.groupId, this.consumer, this.definition.consumer);
    const persistence = await this.o.backend.forPartition(partitionOwner);
    const persistenceMs = performance.now() - startedAt;
    const committed = await partitionOwner.committedOffset();
    const committedMs = performance.now() - startedAt - persistenceMs;
    const assignedAt = committed ?? '0';
    const flow = createPartitionFlow(this.definition, {
      topic,
      partition,
      assignedAt,
      persistence,
      logger: this.log,
      metrics: this.o.metrics,
      stateCache: this.o.stateCache,
    });
    let outcome: Prepared['outcome'];
    const stopReports = this.reportProgress(slot, owner, persistence);
    try {
      outcome = { keys: await flow.recover() };
    } catch (error) {
      outcome = { error };
    } finally {
      stopReports();
    }
    const ms = performance.now() - startedAt;
    const phases = { persistence: Math.round(persistenceMs), committed: Math.round(committedMs), read: Math.round(ms - persistenceMs - committedMs) };
    return { persistence, flow, assignedAt, outcome, phases, startedAt };
  }

  /** Tells the partition's workflow how far a long state read is (its details panel and status show it). */
  private reportProgress(slot: Slot, owner: { generation: number; memberId: string }, persistence: PartitionPersistence<unknown, unknown>): () => void {
    const { signals } = this.o;
    if (!signals.restoring || !persistence.restoreProgress) return () => undefined;
    const ref = { flow: this.definition.name, topic: slot.topic, partition: slot.partition };
    return reportRestore(
      () => persistence.restoreProgress?.(),
      (p) => signals.restoring!(ref, { generation: owner.generation, memberId: owner.memberId, ...p, at: Date.now() }),
      this.o.restoreReportEveryMs ?? RESTORE_REPORT_EVERY_MS,
      this.log,
    );
  }
}
