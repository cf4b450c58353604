/**
 * The owner of one partition's local state store and its checkpoint (like Kafka Streams'
 * ProcessorStateManager): it decides whether the stored copy can be trusted for a restore, and
 * mirrors every restore and every landed transaction into the store — entries and checkpoint in
 * one LMDB transaction, in order. A failed local write stops the mirroring, never the partition.
 * See docs/local-state.md.
 */
import type { SentRecords } from '../../kafka/errors';
import type { LocalDiscardCause, LocalPartitionStore, LocalUpdate } from './local-state';
import { type PartitionScope, scopeFields, scopeLabels } from './partition-scope';
import type { SnapshotLogReader, StoredSnapshot } from './recovery';
import type { RestoreRound } from './restore-round';

/** A partition's local state store and what its restore checks need. */
export interface LocalStateHook {
  readonly store: LocalPartitionStore;
  /** The snapshot topic's delete.retention.ms: tombstones older than that may be compacted away. */
  readonly deleteRetentionMs: () => Promise<number>;
  /** The worker-wide summary of a rebalance's restores. */
  readonly round?: RestoreRound;
  readonly now?: () => number;
  /**
   * Keys are read from the store on demand (a bounded state cache): a restore does not read the
   * store's entries, and the partition's cache of latest records is the store itself.
   */
  readonly onDemand?: boolean;
}

/** Who keeps the changes queued for the store until it has them (the on-demand cache). */
export interface LocalWriteListener {
  /** Changes about to be queued for the store (they landed in Kafka, or a restore read them). */
  apply(updates: readonly LocalUpdate[]): void;
  /** A local write committed these changes. */
  inStore(updates: readonly LocalUpdate[]): void;
}

/** The local copy and its checkpoint if they can be trusted; otherwise why not (and the store was emptied). */
export type LocalLoadOutcome =
  /** `entries`: undefined when keys are read on demand (the store has them). `keys`: the store's count. */
  | { kind: 'loaded'; entries: Map<string, StoredSnapshot> | undefined; keys: number; checkpoint: string }
  | { kind: 'full'; cause: LocalDiscardCause | 'none'; reason: string };

export interface LocalStateContext extends PartitionScope {
  /** Where the checkpoint is checked against the snapshot partition's log start and end. */
  readonly reader: SnapshotLogReader;
  /** Each write of ours is a transaction whose commit marker takes the offset after its records (transactional mode); caching mode's plain writes have none. */
  readonly commitMarkers: boolean;
}

export class LocalStateManager {
  /** The offset the next transaction's records must start at for the checkpoint to advance. */
  private expect: bigint | undefined;
  /** Local writes, in order (each one LMDB transaction). */
  private chain: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private readonly labels: { flow: string; topic: string; partition: string };
  /** The on-demand cache, told of every change queued for the store and of every write committed. */
  listener: LocalWriteListener | undefined;
  /** A load started ahead of the restore (preload), for its load() to take. */
  private preloaded: Promise<LocalLoadOutcome> | undefined;

  constructor(
    readonly hook: LocalStateHook,
    private readonly c: LocalStateContext,
  ) {
    this.labels = scopeLabels(c);
  }

  /** A local write failed: the copy stays at its last checkpoint and nothing more is mirrored. */
  get broken(): boolean {
    return this.stopped;
  }

  /**
   * Starts load() now, for the restore's load() to take: while the partition's producer fences,
   * which nothing here depends on — the checks read the snapshot partition's log start and end,
   * and a checkpoint (the offset after one of our own landed writes) is never past the log end
   * whether or not a fence has appended an abort marker since.
   */
  preload(): void {
    if (this.preloaded) return;
    this.preloaded = this.loadNow();
    this.preloaded.catch(() => undefined); // the restore that takes it sees the failure
  }

  /** The local copy and its checkpoint if they can be trusted; otherwise why not (and the store is emptied). */
  load(): Promise<LocalLoadOutcome> {
    const preloaded = this.preloaded;
    this.preloaded = undefined;
    return preloaded ?? this.loadNow();
  }

  private async loadNow(): Promise<LocalLoadOutcome> {
    const { snapshotTopic, input, reader } = this.c;
    const local = this.hook;
    const tp = `${snapshotTopic}-${input.partition}`;
    const loaded = await local.store.load({ readEntries: !local.onDemand });
    let untrusted: { cause: LocalDiscardCause; reason: string } | undefined;
    if (loaded.kind === 'untrusted') untrusted = loaded;
    else if (loaded.kind === 'loaded') {
      const c = loaded.checkpoint;
      const checkpoint = BigInt(c.checkpoint);
      const logStart = BigInt(await reader.logStartOffset(snapshotTopic, input.partition));
      const logEnd = BigInt(await reader.logEndOffset(snapshotTopic, input.partition));
      const age = (local.now ?? Date.now)() - c.currentAt;
      const retention = await local.deleteRetentionMs();
      if (checkpoint < logStart) untrusted = { cause: 'log-start', reason: `checkpoint ${checkpoint} is below the log start offset ${logStart}` };
      else if (checkpoint > logEnd) untrusted = { cause: 'beyond-log-end', reason: `checkpoint ${checkpoint} is beyond the log end offset ${logEnd} (topic recreated or truncated?)` };
      else if (age > retention) {
        untrusted = { cause: 'retention', reason: `checkpoint last current ${Math.round(age / 1000)} s ago, longer than delete.retention.ms ${retention} (tombstones may be gone)` };
      } else {
        this.c.log.info({ ...this.where(), checkpoint: c.checkpoint, keys: c.keys }, `local state of ${tp}: ${c.keys} keys, checkpoint ${c.checkpoint}`);
        return { kind: 'loaded', entries: loaded.entries, keys: c.keys, checkpoint: c.checkpoint };
      }
    }
    if (untrusted) {
      this.c.log.warn({ ...this.where(), cause: untrusted.cause, reason: untrusted.reason, path: local.store.path }, `local state of ${tp} discarded: ${untrusted.reason}; restoring from the start of ${tp}`);
      this.c.metrics?.localStateDiscarded.inc({ ...this.labels, cause: untrusted.cause });
    } else {
      this.c.log.info({ ...this.where(), path: local.store.path }, `no checkpoint, restoring from the start of ${tp}`);
    }
    await local.store.discard();
    return untrusted ? { kind: 'full', ...untrusted } : { kind: 'full', cause: 'none', reason: 'no checkpoint' };
  }

  /** A restore read up to `bound`: its changes go to the store with the checkpoint `bound`, and our next transaction is expected there. */
  restored(updates: readonly LocalUpdate[], previous: (key: string) => StoredSnapshot | undefined, bound: string): void {
    this.write(updates, previous, bound);
    this.expect = BigInt(bound);
  }

  /**
   * A write of ours landed (`ours`: where its snapshot records went): its changes go to the
   * store, and the checkpoint advances to just after our records only when they start exactly
   * where the checkpoint expects (after the recovery bound, or after our previous transaction's
   * commit marker — caching mode: our previous records). Anything else in between (an aborted
   * transaction's records, a foreign writer: caching mode's stale owner, a retried send) holds the
   * checkpoint where it is: still correct, the next restore reads a little more.
   */
  landed(updates: readonly LocalUpdate[], previous: (key: string) => StoredSnapshot | undefined, ours: SentRecords | undefined, messages: number): void {
    let checkpoint: string | undefined;
    if (ours) {
      const base = BigInt(ours.baseOffset);
      if (this.expect !== undefined && base === this.expect && ours.count === messages) {
        const end = base + BigInt(ours.count);
        checkpoint = String(end);
        this.expect = this.c.commitMarkers ? end + 1n : end; // a transaction's commit marker takes the next offset
      } else if (this.expect !== undefined) {
        this.c.log.info(
          { ...this.where(), expected: String(this.expect), baseOffset: ours.baseOffset, checkpoint: this.hook.store.lastCheckpoint },
          'local state checkpoint held: records between the checkpoint and this transaction that this process did not write',
        );
        this.expect = undefined; // held for the rest of this ownership
      }
    } else if (messages > 0) {
      this.expect = undefined; // records landed where we cannot tell: hold
    }
    this.write(updates, previous, checkpoint);
  }

  /** Resolves once every queued local write has committed. */
  async done(): Promise<void> {
    await this.chain;
  }

  async close(): Promise<void> {
    await this.chain;
    await this.hook.store.close();
  }

  /**
   * Queues one local write (one LMDB transaction: entries and checkpoint); a failure stops
   * mirroring, never the partition. The listener keeps the changes until the store has them (for
   * good, once mirroring stopped).
   */
  private write(updates: readonly LocalUpdate[], previous: (key: string) => StoredSnapshot | undefined, checkpoint: string | undefined): void {
    const listener = this.listener;
    listener?.apply(updates);
    if (this.stopped) return;
    const local = this.hook;
    this.chain = this.chain
      .then(async () => {
        if (this.stopped) return;
        await local.store.write(updates, previous, checkpoint, (local.now ?? Date.now)());
        listener?.inStore(updates);
      })
      .catch((err) => {
        this.stopped = true;
        this.c.metrics?.localStateWriteFailures.inc(this.labels);
        this.c.log.warn(
          { ...this.where(), err, path: local.store.path },
          'local state write failed: the local copy stays at its last checkpoint (the next restore reads more of the topic)',
        );
      });
  }

  private where() {
    return scopeFields(this.c);
  }
}
