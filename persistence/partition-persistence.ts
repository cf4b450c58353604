import type { JournalEvent, Snapshot, WriteStatus } from './types';

/**
 * Everything the engine asks of one key in one persist: at most one of `snapshot` (put) and
 * `delete`, plus the journal events folded since the last successful write.
 */
export interface KeyWrite<S, V> {
  readonly key: string;
  /** The key's new snapshot (snapshot modes). */
  readonly snapshot?: Snapshot<S>;
  /** The fold returned no state: delete the key's snapshot, journal and key entry. */
  readonly delete?: { readonly offset: number };
  /** Records folded since the last write (journal modes), in offset order. */
  readonly events?: readonly JournalEvent<V>[];
  /** The key has nothing stored yet: register it with the key store. */
  readonly addKey?: boolean;
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
}

/** A key found by recovery: its snapshot (snapshot modes) or its journal (journal mode). */
export interface RecoveredKey<S, V> {
  readonly key: string;
  readonly snapshot?: Snapshot<S>;
  readonly events?: readonly JournalEvent<V>[];
}

/**
 * The engine's port to a backend, for one input partition. Implement it directly for a backend
 * whose writes and offset commit share a transaction (Kafka); compose it from SnapshotStore,
 * JournalStore, KeyStore and OffsetCommitter with StorePartitionPersistence otherwise.
 *
 * `write` throws `SnapshotWriteFenced` when this owner is fenced (nothing landed), and any other
 * error when the batch failed as a whole; per-key refusals are `not-applied` statuses.
 */
export interface PartitionPersistence<S, V> {
  /** The most writes the engine puts in one batch (e.g. maxWritesPerTransaction). */
  readonly maxWritesPerBatch: number;
  /** Every key with persisted state, read once when the partition is assigned. */
  recover(): AsyncIterable<RecoveredKey<S, V>>;
  /** One key, read again after it was unloaded from memory. */
  read(key: string): Promise<RecoveredKey<S, V> | undefined>;
  write(batch: WriteBatch<S, V>): Promise<WriteBatchResult>;
}
