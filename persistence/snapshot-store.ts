import type { Snapshot, StoredKey, TopicPartition, WriteStatus } from '../core/persistence-types';

/**
 * Put a key's latest snapshot; delete it, leaving a delete marker at `offset` (the record whose
 * fold deleted the state); or purge the marker once the committed offset has passed it.
 */
export type SnapshotWrite<S> = (
  | { readonly kind: 'put'; readonly key: string; readonly snapshot: Snapshot<S> }
  | { readonly kind: 'delete'; readonly key: string; readonly offset: number }
  | { readonly kind: 'purge'; readonly key: string; readonly offset: number }
) & {
  /** The key has no stored row yet as far as the owner knows (a store that lists keys records when it first appeared). */
  readonly newKey?: boolean;
};

/**
 * Where snapshots live. Writes come in batches (one persist's dirty keys) so a backend can group
 * them: a Kafka producer batch, a Cassandra unlogged batch of LWTs. A store may make a write
 * conditional on what is stored and answer `not-applied` for a key another owner holds newer
 * state of (the engine then stops the partition as fenced); it throws `SnapshotWriteFencedError`
 * when the writer itself is no longer the owner, and any other error when the batch failed —
 * including a refusal that says nothing of another owner (the partition then recovers).
 */
export interface SnapshotStore<S> {
  read(partition: TopicPartition, key: string): Promise<StoredKey<S> | undefined>;
  /** Every key's snapshot (or delete marker) of the partition, for recovery. */
  readAll(partition: TopicPartition): AsyncIterable<readonly [key: string, stored: StoredKey<S>]>;
  /** One status per write, in the order given. */
  writeBatch(partition: TopicPartition, writes: readonly SnapshotWrite<S>[]): Promise<WriteStatus[]>;
  /**
   * Called after the key store unlisted the keys of applied purges: those whose row another
   * engine of the partition has written since (a stale owner, or an earlier engine of the same
   * generation), which must stay listed — `marker` when that row is a delete marker. A store whose
   * key listing cannot race its purges (or that lists keys itself) leaves it out.
   */
  writtenSincePurge?(partition: TopicPartition, purges: readonly PurgedKey[]): Promise<ListedAgain[]>;
}

/** A key whose delete marker at `offset` a purge removed. */
export interface PurgedKey {
  readonly key: string;
  readonly offset: number;
}

/** A purged key that another engine wrote since: list it again (and pin it if a `marker`). */
export interface ListedAgain {
  readonly key: string;
  readonly marker: boolean;
}
