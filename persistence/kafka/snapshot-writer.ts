/**
 * What both snapshot writers of a partition share (transactional-snapshot-writer.ts,
 * caching-snapshot-writer.ts): the cache they update, the fence that stops the partition, and the
 * counts (stats and metrics).
 */
import type { SnapshotWriteFencedError } from '../../core/fence-errors';
import type { WriteBatch, WriteBatchResult } from '../../flow/ports';
import { type PartitionScope, scopeFields, scopeLabels } from './partition-scope';
import type { SentRecords } from '../../kafka/errors';
import type { LocalStateManager } from './local-state-manager';
import type { StoredSnapshot } from './recovery';
import type { PreparedBatch } from './snapshot-batch';
import { landedUpdates, prepareBatch } from './snapshot-batch';
import type { SnapshotCache } from './snapshot-cache';
import type { SnapshotFormat } from './snapshot-format';

export interface PersistenceStats {
  /** Transactions committed (caching mode: batches sent). */
  transactions: number;
  /** Snapshot records (puts and tombstones) that landed. */
  records: number;
  fences: number;
  commitTimeouts: number;
}

/** Where a writer writes, and what it updates and reports to. */
export interface WriterContext<S> extends PartitionScope {
  readonly format: SnapshotFormat<S>;
  readonly cache: SnapshotCache<S>;
  /** Called once when a fence stops this partition. */
  readonly onFence?: (err: SnapshotWriteFencedError) => void;
}

export abstract class SnapshotWriter<S, V> {
  readonly stats: PersistenceStats = { transactions: 0, records: 0, fences: 0, commitTimeouts: 0 };
  /** The offset every transaction commits at least (seeded at assignment; transactional mode). */
  offsetToCommit = 0;
  protected fence: SnapshotWriteFencedError | undefined;
  protected readonly labels: { flow: string; topic: string; partition: string };

  constructor(protected readonly c: WriterContext<S>) {
    this.labels = scopeLabels(c);
  }

  /** Why this partition stopped writing, if a fence stopped it. */
  get fenced(): SnapshotWriteFencedError | undefined {
    return this.fence;
  }

  /** One batch; the caller runs one at a time. */
  abstract write(batch: WriteBatch<S, V>): Promise<WriteBatchResult>;

  protected prepare(batch: WriteBatch<S, V>): PreparedBatch {
    return prepareBatch(batch.writes, { snapshotTopic: this.c.snapshotTopic, partition: this.c.input.partition, format: this.c.format });
  }

  protected count(prepared: PreparedBatch, started: number): void {
    this.stats.transactions++;
    this.stats.records += prepared.messages.length;
    const m = this.c.metrics;
    if (!m) return;
    m.transactionDuration.observe(this.labels, (performance.now() - started) / 1000);
    if (prepared.puts > 0) m.records.inc({ ...this.labels, kind: 'put' }, prepared.puts);
    if (prepared.tombstones > 0) m.records.inc({ ...this.labels, kind: 'tombstone' }, prepared.tombstones);
  }

  /**
   * A write landed: its records get their offsets, the cache its updates, and the local store (if
   * any) the same updates with the checkpoint that follows them. `sent`: where the records went —
   * one request, or several in a row (caching mode splits a large batch); if others wrote between
   * them the offsets are not known and the local checkpoint holds.
   */
  protected applyLanded(prepared: PreparedBatch, sent: readonly SentRecords[], local: LocalStateManager | undefined): void {
    const ours = contiguous(sent.filter((x) => x.topic === this.c.snapshotTopic && x.partition === this.c.input.partition));
    const updates = landedUpdates(prepared, ours);
    if (!local || local.broken) {
      this.c.cache.apply(updates);
      return;
    }
    const previous = new Map<string, StoredSnapshot | undefined>();
    for (const [key] of updates) if (!previous.has(key)) previous.set(key, this.c.cache.get(key));
    this.c.cache.apply(updates);
    local.landed(updates, (k) => previous.get(k), ours, prepared.messages.length);
  }

  /** The first fence stops the partition for good (until its next assignment); later ones are the same stop. */
  onFence(err: SnapshotWriteFencedError): SnapshotWriteFencedError {
    if (this.fence === undefined) {
      this.fence = err;
      this.stats.fences++;
      this.c.metrics?.fences.inc({ ...this.labels, reason: err.reason ?? 'unknown' });
      this.c.log.warn({ ...this.where(), reason: err.reason, err }, 'snapshot writes fenced: this partition stops here until its next assignment');
      this.c.onFence?.(err);
    }
    return err;
  }

  protected where() {
    return scopeFields(this.c);
  }
}

/** Records sent in several requests as one run, if each started where the one before ended; else undefined. */
function contiguous(parts: readonly SentRecords[]): SentRecords | undefined {
  if (parts.length <= 1) return parts[0];
  let count = parts[0]!.count;
  for (let i = 1; i < parts.length; i++) {
    if (BigInt(parts[i]!.baseOffset) !== BigInt(parts[i - 1]!.baseOffset) + BigInt(parts[i - 1]!.count)) return undefined;
    count += parts[i]!.count;
  }
  return { ...parts[0]!, count };
}
