/**
 * Restores one partition's snapshots (like Kafka Streams' ChangelogReader): reads the snapshot
 * partition up to its bound — from the local state's checkpoint when the local copy can be
 * trusted (the delta overwrites and deletes in it), from the log start otherwise — and reports
 * what it did (RecoveryStats, metrics, the rebalance's restore summary).
 */
import type { RestoreProgress } from '../../flow/ports';
import { RecoveryReadStalledError } from './errors';
import type { LocalUpdate } from './local-state';
import type { LocalStateManager } from './local-state-manager';
import { type PartitionScope, scopeFields, scopeLabels } from './partition-scope';
import { readSnapshotPartition, type SnapshotLogReader, type StoredSnapshot } from './recovery';

/** What the last recovery did (the workflow status shows it). */
export interface RecoveryStats {
  readonly snapshotTopic: string;
  readonly partition: number;
  readonly fromOffset: string;
  readonly bound: string;
  readonly lastStableAtStart: string;
  /** The read had to wait for open transactions (the last stable offset was below the bound). */
  readonly waitedForOpenTransactions: boolean;
  readonly keys: number;
  readonly records: number;
  readonly tombstones: number;
  readonly bytes: number;
  readonly fetches: number;
  /** The fence (producer initialization) before the read; 0 in caching mode. */
  readonly fenceMs: number;
  readonly readMs: number;
  readonly ms: number;
  /** Keys taken from the local state store (0 without one). */
  readonly fromLocal: number;
  /** Records read from the snapshot topic (the delta after a checkpoint, or everything). */
  readonly fromTopic: number;
  /** Local state on: `delta` (local state plus the records after its checkpoint) or `full` (the whole partition). */
  readonly restore?: 'delta' | 'full';
  /** Why the local state could not be used (no checkpoint, or why it was discarded). */
  readonly fullRestoreReason?: string;
}

export interface RestorerContext extends PartitionScope {
  readonly reader: SnapshotLogReader;
  readonly recoveryStallTimeoutMs: number;
  /** How often a recovery read without progress is logged; default 5 s. */
  readonly noticeEveryMs?: number;
  /** The local state store (transactional mode): restore from it plus the delta. */
  readonly local?: LocalStateManager;
}

export interface Restored {
  /** Each key's latest record; undefined when keys are read from the local store on demand. */
  readonly entries: Map<string, StoredSnapshot> | undefined;
  readonly stats: RecoveryStats;
}

/** The changes a read of the snapshot partition makes to a local copy, given each key's entry there `before`. */
export function deltaOf(
  read: { readonly deleted: ReadonlySet<string>; readonly snapshots: ReadonlyMap<string, StoredSnapshot> },
  before: (key: string) => StoredSnapshot | undefined,
): { updates: LocalUpdate[]; previous: Map<string, StoredSnapshot | undefined>; added: number; removed: number } {
  const updates: LocalUpdate[] = [];
  const previous = new Map<string, StoredSnapshot | undefined>();
  let added = 0;
  let removed = 0;
  for (const key of read.deleted) {
    const was = before(key);
    if (was) removed++;
    previous.set(key, was);
    updates.push([key, undefined]);
  }
  for (const [key, stored] of read.snapshots) {
    const was = before(key);
    if (!was) added++;
    previous.set(key, was);
    updates.push([key, stored]);
  }
  return { updates, previous, added, removed };
}

export class SnapshotRestorer {
  private readonly labels: { flow: string; topic: string; partition: string };
  /** How far the running restore's topic read is (undefined until its first fetch). */
  progress: RestoreProgress | undefined;

  constructor(private readonly c: RestorerContext) {
    this.labels = scopeLabels(c);
  }

  /** `fenceMs`: how long the fence before this restore took (counted in its time). */
  async restore(fenceMs: number): Promise<Restored> {
    const started = performance.now();
    const { reader, snapshotTopic, input, local } = this.c;
    local?.hook.round?.begin();
    this.progress = undefined;
    let restored = false;
    try {
      const fromLocal = local ? await local.load() : undefined;
      let read: Awaited<ReturnType<typeof readSnapshotPartition>>;
      try {
        read = await readSnapshotPartition({
          reader,
          topic: snapshotTopic,
          partition: input.partition,
          stallTimeoutMs: this.c.recoveryStallTimeoutMs,
          noticeEveryMs: this.c.noticeEveryMs,
          fromOffset: fromLocal?.kind === 'loaded' ? fromLocal.checkpoint : undefined,
          logger: this.c.log,
          onProgress: (read, fraction) => {
            this.progress = { read, unit: 'snapshot records', fraction };
          },
        });
      } catch (err) {
        if (err instanceof RecoveryReadStalledError) {
          this.c.metrics?.recoveryStalls.inc({ ...this.labels, cause: err.cause });
          this.c.log.error({ ...this.where(), cause: err.cause, err }, 'snapshot recovery read stalled');
        }
        throw err;
      }
      const readMs = performance.now() - started;
      const localKeys = fromLocal?.kind === 'loaded' ? fromLocal.keys : 0;
      let entries: Map<string, StoredSnapshot> | undefined;
      let keys: number;
      if (local && fromLocal?.kind === 'loaded') {
        // Local copy + delta: tombstones delete locally, every record of the delta overwrites.
        const merged = fromLocal.entries;
        const delta = deltaOf(read, (key) => (merged ? merged.get(key) : local.hook.store.get(key)));
        keys = fromLocal.keys + delta.added - delta.removed;
        if (merged) for (const [key, next] of delta.updates) next ? merged.set(key, next) : merged.delete(key);
        entries = merged;
        local.restored(delta.updates, (k) => delta.previous.get(k), read.bound);
      } else {
        keys = read.snapshots.size;
        if (local) local.restored([...read.snapshots], () => undefined, read.bound);
        // Read on demand: the store (and until it has them, the cache's pending changes) holds them.
        entries = local?.hook.onDemand ? undefined : read.snapshots;
      }
      const ms = fenceMs + readMs;
      const stats: RecoveryStats = {
        snapshotTopic,
        partition: input.partition,
        fromOffset: read.fromOffset,
        bound: read.bound,
        lastStableAtStart: read.lastStableAtStart,
        waitedForOpenTransactions: BigInt(read.lastStableAtStart) < BigInt(read.bound),
        keys,
        records: read.records,
        tombstones: read.tombstones,
        bytes: read.bytes,
        fetches: read.fetches,
        fenceMs,
        readMs,
        ms,
        fromLocal: localKeys,
        fromTopic: read.records,
        restore: local ? (fromLocal?.kind === 'loaded' ? 'delta' : 'full') : undefined,
        fullRestoreReason: fromLocal && fromLocal.kind !== 'loaded' ? fromLocal.reason : undefined,
      };
      this.c.metrics?.recoveryDuration.observe(this.labels, ms / 1000);
      this.c.metrics?.recoveredKeys.inc(this.labels, keys);
      if (local) {
        const m = this.c.metrics;
        const kind = stats.restore ?? 'full';
        m?.restores.inc({ ...this.labels, kind, reason: fromLocal?.kind === 'loaded' ? 'checkpoint' : (fromLocal?.cause ?? 'none') });
        m?.restoreLocalKeys.inc(this.labels, localKeys);
        m?.restoreTopicRecords.inc({ ...this.labels, kind }, read.records);
        this.c.log.info(
          { ...this.where(), fromLocal: localKeys, fromTopic: read.records, keys, fromOffset: read.fromOffset, bound: read.bound, ms: Math.round(ms) },
          `restored ${snapshotTopic}-${input.partition}: ${localKeys} from local state, ${read.records} from the topic, ${Math.round(ms)} ms`,
        );
        local.hook.round?.end({ fromLocal: localKeys, fromTopic: read.records, full: kind === 'full' });
        restored = true;
      }
      return { entries, stats };
    } finally {
      if (local && !restored) local.hook.round?.end(undefined);
    }
  }

  private where() {
    return scopeFields(this.c);
  }
}
