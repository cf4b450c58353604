/**
 * The engine's ports: what `flow/` asks of a persistence backend, for one input partition. The
 * engine declares them and every backend (`persistence/`) implements them; the vocabulary they
 * speak (snapshots, journal events, outputs) and the fence errors a write may throw live in
 * `core/`, shared with the backends and the Kafka port.
 */
import type { PendingOutput } from '../core/emitted-outputs';
import type { JournalEvent, Snapshot, TimeDomain, WriteStatus } from '../core/persistence-types';

/**
 * Everything the engine asks of one key in one persist: at most one of `snapshot` (put) and
 * `delete`, plus the journal events folded since the last successful write.
 */
export interface KeyWrite<S, V> {
  readonly key: string;
  /** The key's new snapshot (snapshot modes). */
  readonly snapshot?: Snapshot<S>;
  /**
   * The fold returned no state at `offset`: delete the key's state, leaving a delete marker with
   * the offset (a replay from below the offset skips the records the deletion covers).
   */
  readonly delete?: { readonly offset: number };
  /**
   * The committed offset has passed the key's delete marker (at `offset`): remove everything
   * stored for the key — marker, journal and key entry.
   */
  readonly purge?: { readonly offset: number };
  /** Records folded since the last write (journal modes), in offset order. */
  readonly events?: readonly JournalEvent<V>[];
  /** The key has nothing stored yet: register it with the key store. */
  readonly addKey?: boolean;
  /** Records to produce with this write (dead letters): they land exactly when the write does (transactional), or before it. */
  readonly outputs?: readonly PendingOutput[];
}

/**
 * One unit of persistence: key writes, then the input offset to commit once they have landed. A
 * transactional backend sends both in one transaction (so the commit never leads the writes it
 * covers and a fenced batch lands nothing); the engine never hands it more than
 * `maxWritesPerBatch` writes at once.
 */
export interface WriteBatch<S, V> {
  readonly writes: readonly KeyWrite<S, V>[];
  /** Commit this offset after the writes, and only if every write in the batch was applied. */
  readonly commitOffset?: number;
}

export interface WriteBatchResult {
  /** One per write, in order. A transactional batch is all `applied` or throws. */
  readonly statuses: readonly WriteStatus[];
  /** Whether `commitOffset` was committed. */
  readonly committed: boolean;
  /**
   * Set when the writes landed but the separate offset commit then failed (non-transactional
   * backends): the writes count, the commit does not.
   */
  readonly commitError?: unknown;
  /**
   * The stored size in bytes of each write, in order (a put's snapshot record as written; 0 for a
   * purge), where the backend knows it: a byte-bounded state cache counts a key by it.
   */
  readonly sizes?: readonly number[];
}

/**
 * A recovered snapshot whose state is decoded when `state` is first read: the backend kept its
 * stored bytes and read only the offset. Reading `state` throws CorruptSnapshotError (with the
 * snapshot's location) when the bytes do not decode. The engine keeps such a snapshot undecoded
 * until its key is first used (a record past its offset, or a read of its state), so keys that
 * are never touched are never decoded.
 */
export interface LazySnapshot<S> extends Snapshot<S> {
  readonly lazy: true;
}

export function isLazySnapshot<S>(snapshot: Snapshot<S> | undefined): snapshot is LazySnapshot<S> {
  return snapshot !== undefined && (snapshot as Partial<LazySnapshot<S>>).lazy === true;
}

/** A key found by recovery: its snapshot (snapshot modes), its delete marker, or its journal (journal mode). */
export interface RecoveredKey<S, V> {
  readonly key: string;
  /** Possibly a LazySnapshot: its `state` is decoded when read. */
  readonly snapshot?: Snapshot<S>;
  /** The key was deleted by the record at `offset` and the committed offset may not have passed it yet. */
  readonly deleted?: { readonly offset: number };
  readonly events?: readonly JournalEvent<V>[];
  /** The stored size in bytes of the key's record, where the backend knows it (see WriteBatchResult.sizes). */
  readonly size?: number;
}

/** What the engine asks the store for (PartitionPersistence.readDue). */
export interface DueLook {
  readonly time: TimeDomain;
  /**
   * Due after this (exclusive): the engine looked up to it before and read back every key out of
   * memory due by then (-Infinity: look from the first; it does after a key left memory).
   */
  readonly after: number;
  /** Due at or before this. */
  readonly until: number;
  /** At most this many keys. */
  readonly limit: number;
  /** The keys the engine holds (left out). */
  readonly inMemory: (key: string) => boolean;
}

/** Keys out of memory with a timer due, read from the store (PartitionPersistence.readDue). */
export interface DueKeys<S, V> {
  readonly keys: readonly RecoveredKey<S, V>[];
  /**
   * A time no key out of memory is due before, after `until`, as far as the store knows now: the
   * earliest such key's due time, or earlier (+Infinity: none).
   */
  readonly next: number;
}

/** How far a running recovery has read: what the operator's console shows while it runs. */
export interface RestoreProgress {
  /** Read so far, in `unit`s. */
  readonly read: number;
  /** What `read` counts: 'snapshot records' (Kafka), 'keys' (Cassandra). */
  readonly unit: string;
  /** The share of the read done, 0–1, when its end is known (the snapshot partition's offsets, the key segments or buckets listed). */
  readonly fraction?: number;
}

/**
 * The engine's port to a backend, for one input partition. Implement it directly for a backend
 * whose writes and offset commit share a transaction (Kafka); compose it from SnapshotStore,
 * JournalStore, KeyStore and OffsetCommitter with StorePartitionPersistence otherwise.
 *
 * `write` throws `SnapshotWriteFencedError` when this owner is fenced (nothing landed), and any other
 * error when the batch failed as a whole; per-key refusals are `not-applied` statuses.
 */
export interface PartitionPersistence<S, V> {
  /** The most writes the engine puts in one batch (e.g. maxWritesPerTransaction). */
  readonly maxWritesPerBatch: number;
  /**
   * A batch's writes and its offset commit land together or not at all (one Kafka transaction).
   * Without it (the default), a key deleted since it was stored always gets its delete marker
   * first, purged once the commit has passed it: a purge that landed without its commit would let
   * a replay fold the key again from nothing.
   */
  readonly atomicCommit?: boolean;
  /** Every key with persisted state, read once when the partition is assigned. */
  recover(): AsyncIterable<RecoveredKey<S, V>>;
  /** How far the running `recover()` has read (undefined before it reads, or when the backend cannot say). */
  restoreProgress?(): RestoreProgress | undefined;
  /** One key, read again after it was unloaded from memory. */
  read(key: string): Promise<RecoveredKey<S, V> | undefined>;
  /**
   * Set by a backend that reads any key from its store on demand (a bounded state cache): whether
   * the store has state for a key not in memory, answered at once. `recover()` then yields no keys
   * (each is read back when a record comes for it) and the engine may unload any key whose state
   * the store holds.
   */
  readonly has?: (key: string) => boolean;
  /**
   * With `has`: the keys out of memory with a key timer due in the look's range, read now (at most
   * `limit` of them; the store's due-time index), and how far the store knows no other key out of
   * memory is due. The engine takes them into memory, so their timers join its queues and fire as
   * an in-memory key's do; it may then unload keys with pending timers.
   */
  readonly readDue?: (look: DueLook) => DueKeys<S, V>;
  /**
   * With `has`: one key read now (undefined: the store has nothing for it) — a record for a key out
   * of memory folds at once instead of waiting for `read` (one store lookup, no round trip).
   */
  readonly readNow?: (key: string) => RecoveredKey<S, V> | undefined;
  write(batch: WriteBatch<S, V>): Promise<WriteBatchResult>;
  /** Releases what this partition's persistence holds (a transactional producer), if anything. */
  close?(): Promise<void>;
}
