/**
 * Each key's latest snapshot record of one partition, as bytes in memory: recovery fills it, every
 * landed write updates it, and a key the engine unloaded is read back from it (the snapshot topic
 * is never read per key). A record is handed to the engine undecoded (a LazySnapshot) when its
 * kind and offset can be read off the envelope's start: the state is decoded when first used.
 */
import { CorruptSnapshotError, decodeSnapshot, type Location } from '../../core/codec/errors';
import { isDeleteMarker } from '../../core/persistence-types';
import type { LazySnapshot, RecoveredKey } from '../../flow/ports';
import type { StoredSnapshot } from './recovery';
import type { SnapshotFormat } from './snapshot-format';

export interface Where<S> {
  readonly format: SnapshotFormat<S>;
  readonly snapshotTopic: string;
  readonly partition: number;
}

function locationOf(where: Where<unknown>, key: string, stored: StoredSnapshot): Location {
  return { topic: where.snapshotTopic, partition: where.partition, key, offset: stored.offset };
}

/** A stored snapshot record whose state is decoded when first read (then kept). */
class StoredLazySnapshot<S> implements LazySnapshot<S> {
  private decoded: { state: S } | undefined;

  constructor(
    private readonly where: Where<S>,
    private readonly key: string,
    private readonly stored: StoredSnapshot,
    readonly offset: number,
  ) {}

  get lazy(): true {
    return true;
  }

  /** Throws CorruptSnapshotError at the record's location if its bytes do not decode. */
  get state(): S {
    if (this.decoded) return this.decoded.state;
    const location = locationOf(this.where, this.key, this.stored);
    const full = decodeSnapshot(this.where.format, this.stored.bytes, location);
    if (isDeleteMarker(full) || full.offset !== this.offset) {
      // Only a record with two "offset" fields (JSON keeps the last) gets here.
      throw new CorruptSnapshotError(
        location,
        new Error(`the envelope starts with offset ${this.offset} but decodes to ${isDeleteMarker(full) ? 'a delete marker' : `offset ${full.offset}`}`),
      );
    }
    this.decoded = { state: full.state };
    return full.state;
  }
}

/** A key's change: its next record, or undefined when it is gone (a tombstone). */
export type SnapshotUpdate = readonly [key: string, next: StoredSnapshot | undefined];

export class SnapshotCache<S> {
  protected entries = new Map<string, StoredSnapshot>();

  constructor(protected readonly where: Where<S>) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): StoredSnapshot | undefined {
    return this.entries.get(key);
  }

  /** Whether a record is kept for the key. */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** Every key, as recovery left them. */
  all(): IterableIterator<[string, StoredSnapshot]> {
    return this.entries.entries();
  }

  /** What a recovery read: the cache starts over from it. */
  replace(entries: Map<string, StoredSnapshot>): void {
    this.entries = entries;
  }

  apply(updates: readonly SnapshotUpdate[]): void {
    for (const [key, stored] of updates) {
      if (stored) this.entries.set(key, stored);
      else this.entries.delete(key);
    }
  }

  /**
   * A stored record as the engine takes it back: its snapshot (lazy when its offset can be read
   * without decoding it), or its delete marker. A record in another layout is decoded now, so a
   * damaged one fails here with CorruptSnapshotError; a lazy one fails when its state is read.
   */
  recovered<V>(key: string, stored: StoredSnapshot): RecoveredKey<S, V> {
    const size = stored.bytes.length;
    const peeked = this.where.format.peek(stored.bytes);
    if (peeked) {
      return peeked.deleted
        ? { key, deleted: { offset: peeked.offset }, size }
        : { key, snapshot: new StoredLazySnapshot(this.where, key, stored, peeked.offset), size };
    }
    const decoded = decodeSnapshot(this.where.format, stored.bytes, locationOf(this.where, key, stored));
    return isDeleteMarker(decoded) ? { key, deleted: { offset: decoded.offset }, size } : { key, snapshot: decoded, size };
  }
}
