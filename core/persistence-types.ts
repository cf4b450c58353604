/**
 * The vocabulary shared by the engine (`flow/`) and every backend. Offsets are plain numbers here
 * (the engine asserts they stay below 2^53); each edge turns them into strings through flow/offsets.ts.
 */

/** One input partition. Stores are scoped by it: a partition's keys never mix with another's. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/**
 * A key's persisted state and the offset of the last input record folded into it. After recovery
 * the key skips records at or below `offset`, which is what keeps state exactly-once with respect
 * to the input even though the committed offset is the minimum over keys.
 */
export interface Snapshot<S> {
  readonly state: S;
  readonly offset: number;
  /** The key's pending timers (ctx.timers, stateTtl), persisted with its state; absent: none. */
  readonly timers?: readonly KeyTimer[];
}

/** Which clock a key timer follows: the owner's (`processing`), or the partition's records' timestamps (`event`). */
export type TimeDomain = 'processing' | 'event';

/** One pending timer of a key: it fires once its clock reaches `at` (ms since the epoch). Unique by name per key. */
export interface KeyTimer {
  readonly name: string;
  readonly at: number;
  readonly time: TimeDomain;
}

/**
 * What a store keeps for a key whose fold returned no state: the offset of the record whose fold
 * deleted it. It stays until the committed input offset passes that offset (then the key is
 * purged), so a replay from a lower committed offset skips the records the deletion already
 * covers instead of folding them into a fresh, wrong state.
 */
export interface DeleteMarker {
  readonly deleted: true;
  readonly offset: number;
}

/** A key as a snapshot store holds it: its latest snapshot, or its delete marker. */
export type StoredKey<S> = Snapshot<S> | DeleteMarker;

export function isDeleteMarker(stored: StoredKey<unknown> | undefined): stored is DeleteMarker {
  return stored !== undefined && (stored as DeleteMarker).deleted === true;
}

/**
 * A journal entry: one input record as the fold saw it (decoded), so recovery can replay it through
 * the same fold. The engine's FlowRecord (flow/record.ts) is this record with kafkajs's header types.
 */
export interface JournalEvent<V> {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: string;
  readonly value: V;
  readonly timestamp: string;
  readonly headers: Readonly<Record<string, unknown>>;
}

/**
 * The outcome of one key's write. `not-applied` is a conditional write the store refused because
 * another owner holds newer state — a stale writer; nothing landed. Cassandra's LWT fence answers
 * it only when a newer generation wrote the key (a refusal that says nothing of another owner
 * fails the batch with an error instead); the in-memory store's offset gate, for tests, takes any
 * newer offset as another owner's.
 */
export type WriteStatus = 'applied' | 'not-applied';

/** How a flow persists its keys. */
export type PersistenceMode = (typeof PERSISTENCE_MODES)[number];

/** Every PersistenceMode, for the backends' option schemas. */
export const PERSISTENCE_MODES = ['none', 'snapshots', 'journal', 'journal+snapshots'] as const;

export function persistsSnapshots(mode: PersistenceMode): boolean {
  return mode === 'snapshots' || mode === 'journal+snapshots';
}

export function persistsJournal(mode: PersistenceMode): boolean {
  return mode === 'journal' || mode === 'journal+snapshots';
}

/**
 * A record to produce with a key's write (a dead letter, or a record the fold emitted): in the
 * same transaction as the key's snapshot and the offset commit with transactional Kafka
 * persistence (exactly once), before the offset commit otherwise (at least once).
 */
export interface OutputRecord {
  /** `dead-letter` (default) or `emitted` (by the fold, `ctx.emit`): counted apart, partitioned apart. */
  readonly kind?: 'dead-letter' | 'emitted';
  readonly topic: string;
  /**
   * Default: the backend picks — a dead letter or a keyless output goes to the input partition
   * (modulo the topic's partition count), an emitted record with a key by the key's murmur2 hash
   * (Kafka's default partitioner).
   */
  readonly partition?: number;
  readonly key: Buffer | string | null;
  readonly value: Buffer | string | null;
  readonly headers?: Readonly<Record<string, string | Buffer>>;
}
