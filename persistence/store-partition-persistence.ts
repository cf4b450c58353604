import type { JournalStore } from './journal-store';
import type { KeyStore } from './key-store';
import type { OffsetCommitter } from './offset-committer';
import type {
  KeyWrite,
  PartitionPersistence,
  RecoveredKey,
  WriteBatch,
  WriteBatchResult,
} from '../flow/ports';
import type {
  OutputSender,
} from './output-sender';
import type { SnapshotStore, SnapshotWrite } from './snapshot-store';
import {
  isDeleteMarker,
  type JournalEvent,
  type PersistenceMode,
  persistsJournal,
  persistsSnapshots,
  type TopicPartition,
  type WriteStatus,
} from '../core/persistence-types';

export interface StorePartitionPersistenceOptions<S, V> {
  readonly partition: TopicPartition;
  /** Decides what recovery reads: snapshots (snapshot modes) or journals (journal mode). */
  readonly mode: PersistenceMode;
  readonly snapshots?: SnapshotStore<S>;
  readonly journal?: JournalStore<V>;
  /** Lists the keys to recover; without one, recovery walks the snapshot store. */
  readonly keys?: KeyStore;
  readonly committer: OffsetCommitter;
  readonly maxWritesPerBatch?: number;
  /** Produces the writes' outputs (dead letters) before anything else of the batch: at least once. */
  readonly outputs?: OutputSender;
  /** A local copy of the stores written ahead of them (Cassandra's local state). */
  readonly local?: LocalMirror<S, V>;
}

/**
 * A local copy of what the stores hold, kept ahead of them: each batch is written to it once its
 * outputs are produced and before any store gets it, and the offset commit carries the copy's
 * metadata (persistence/cassandra/local-state.ts).
 */
export interface LocalMirror<S, V> {
  /** The batch's writes, before the stores get them: each write's stored size, when known. Throws to fail the batch. */
  writeAhead(batch: WriteBatch<S, V>): Promise<readonly number[] | undefined>;
  /** The batch's writes reached the stores (`statuses`: each write's); called before the offset commit. */
  landed(batch: WriteBatch<S, V>, statuses: readonly WriteStatus[]): void;
  /** The metadata the offset commit carries (undefined: none). */
  commitMetadata(): string | undefined;
}

/**
 * A PartitionPersistence made of separate stores and a committer, for backends without a
 * transaction spanning them (Cassandra, memory). Order per batch: outputs (dead letters), the local copy (if any), journals,
 * then snapshots, then the key store, then — only if every write was applied — the offset commit. A crash between the
 * writes and the commit replays records already folded into snapshots; the snapshot offset makes
 * that replay a no-op.
 */
export class StorePartitionPersistence<S, V> implements PartitionPersistence<S, V> {
  readonly maxWritesPerBatch: number;
  private readonly o: StorePartitionPersistenceOptions<S, V>;

  constructor(options: StorePartitionPersistenceOptions<S, V>) {
    if (persistsSnapshots(options.mode) && !options.snapshots) {
      throw new TypeError(`persistence mode "${options.mode}" needs a SnapshotStore`);
    }
    if (persistsJournal(options.mode) && (!options.journal || !options.keys)) {
      throw new TypeError(`persistence mode "${options.mode}" needs a JournalStore and a KeyStore`);
    }
    this.o = options;
    this.maxWritesPerBatch = options.maxWritesPerBatch ?? Number.POSITIVE_INFINITY;
  }

  async *recover(): AsyncIterable<RecoveredKey<S, V>> {
    const { mode, partition, snapshots, keys } = this.o;
    if (mode === 'none') return;
    if (keys) {
      for await (const key of keys.list(partition)) {
        const found = await this.read(key);
        if (found) yield found;
      }
      return;
    }
    // Snapshot modes without a key store: the snapshot store itself knows the keys.
    for await (const [key, stored] of snapshots!.readAll(partition)) {
      yield isDeleteMarker(stored) ? { key, deleted: { offset: stored.offset } } : { key, snapshot: stored };
    }
  }

  async read(key: string): Promise<RecoveredKey<S, V> | undefined> {
    const { mode, partition, snapshots, journal } = this.o;
    if (persistsSnapshots(mode)) {
      const stored = await snapshots!.read(partition, key);
      if (!stored) return undefined;
      return isDeleteMarker(stored) ? { key, deleted: { offset: stored.offset } } : { key, snapshot: stored };
    }
    if (mode === 'journal') {
      const events: JournalEvent<V>[] = [];
      for await (const event of journal!.read(partition, key)) events.push(event);
      return events.length > 0 ? { key, events } : undefined;
    }
    return undefined;
  }

  async write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    const { partition, snapshots, journal, keys, committer } = this.o;
    const { writes } = batch;
    const statuses: WriteStatus[] = new Array(writes.length).fill('applied');

    const outputs = writes.flatMap((w) => w.outputs ?? []);
    if (outputs.length > 0) {
      if (!this.o.outputs) throw new TypeError('this persistence has no output sender: it cannot produce dead letters');
      await this.o.outputs.send(outputs, partition);
    }
    // After the outputs (a state in the local copy says its outputs were produced: a restore from it
    // does not fold their records again), before the stores and the commit.
    const sizes = await this.o.local?.writeAhead(batch);

    if (journal) {
      // A deleted key's journal stays (with the deleting record) until it is purged: replayed, it
      // ends in no state at the deleting offset — journal mode's delete marker.
      await Promise.all(
        writes.map((w) =>
          w.purge ? journal.delete(partition, w.key) : w.events?.length ? journal.append(partition, w.key, w.events) : undefined,
        ),
      );
    }

    if (snapshots && persistsSnapshots(this.o.mode)) {
      const indexes: number[] = [];
      const snapshotWrites: SnapshotWrite<S>[] = [];
      writes.forEach((w, i) => {
        const sw = toSnapshotWrite(w);
        if (sw) {
          indexes.push(i);
          snapshotWrites.push(sw);
        }
      });
      if (snapshotWrites.length > 0) {
        const result = await snapshots.writeBatch(partition, snapshotWrites);
        result.forEach((status, j) => {
          statuses[indexes[j]!] = status;
        });
      }
    }

    if (keys) {
      // A key's applied delete marker is pinned (if the store can expire keys), before the commit.
      const pinned = keys.pin ? writes.filter((w, i) => w.delete && statuses[i] === 'applied').map((w) => w.key) : [];
      const added = writes.filter((w, i) => w.addKey && !w.purge && !(keys.pin && w.delete) && statuses[i] === 'applied').map((w) => w.key);
      const purges = writes.flatMap((w, i) => (w.purge && statuses[i] === 'applied' ? [{ key: w.key, offset: w.purge.offset }] : []));
      // A put of a key this engine holds as listed asks no listing, but another engine of the
      // partition may have unlisted it since this engine's recovery (its marker purged): keep it listed.
      const touched = keys.touch ? writes.filter((w, i) => w.snapshot && !w.addKey && !w.purge && !w.delete && statuses[i] === 'applied').map((w) => w.key) : [];
      if (added.length > 0) await keys.add(partition, added);
      if (touched.length > 0) await keys.touch!(partition, touched);
      if (pinned.length > 0) await keys.pin!(partition, pinned);
      if (purges.length > 0) {
        await keys.remove(partition, purges.map((p) => p.key));
        // Another engine of the partition may have written a purged key again between the purge
        // and this unlisting: its row must stay listed (a marker's pinned, as above), or recovery
        // and inspect no longer see it.
        const again = (await snapshots?.writtenSincePurge?.(partition, purges)) ?? [];
        const relisted = again.filter((k) => !(keys.pin && k.marker)).map((k) => k.key);
        const repinned = keys.pin ? again.filter((k) => k.marker).map((k) => k.key) : [];
        if (relisted.length > 0) await keys.add(partition, relisted);
        if (repinned.length > 0) await keys.pin!(partition, repinned);
      }
    }

    this.o.local?.landed(batch, statuses);
    const sized = sizes ? { sizes } : {};
    if (batch.commitOffset !== undefined && statuses.every((s) => s === 'applied')) {
      try {
        const metadata = this.o.local?.commitMetadata();
        if (metadata === undefined) await committer.commit(partition, batch.commitOffset);
        else await committer.commit(partition, batch.commitOffset, metadata);
      } catch (commitError) {
        // With no writes there is nothing to report but the failed commit itself.
        if (writes.length === 0) throw commitError;
        return { statuses, committed: false, commitError, ...sized };
      }
      return { statuses, committed: true, ...sized };
    }
    return { statuses, committed: false, ...sized };
  }
}

function toSnapshotWrite<S, V>(w: KeyWrite<S, V>): SnapshotWrite<S> | undefined {
  const newKey = w.addKey === true;
  if (w.purge) return { kind: 'purge', key: w.key, offset: w.purge.offset, newKey };
  if (w.delete) return { kind: 'delete', key: w.key, offset: w.delete.offset, newKey };
  if (w.snapshot) return { kind: 'put', key: w.key, snapshot: w.snapshot, newKey };
  return undefined;
}
