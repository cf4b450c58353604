/**
 * Each key's latest snapshot record of one partition, as bytes in memory: recovery fills it, every
 * landed write updates it, and a key the engine unloaded is read back from it (the snapshot topic
 * is never read per key).
 */
import { decodeSnapshot } from '../../core/codec/errors';
import { isDeleteMarker } from '../../core/persistence-types';
import type { RecoveredKey } from '../../flow/ports';
import type { StoredSnapshot } from './recovery';
import type { SnapshotFormat } from './snapshot-format';

/** A key's change: its next record, or undefined when it is gone (a tombstone). */
export type SnapshotUpdate = readonly [key: string, next: StoredSnapshot | undefined];

export class SnapshotCache<S> {
  private entries = new Map<string, StoredSnapshot>();

  constructor(private readonly where: { readonly format: SnapshotFormat<S>; readonly snapshotTopic: string; readonly partition: number }) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): StoredSnapshot | undefined {
    return this.entries.get(key);
  }

  /** Every key, as recovery left them. */
  all(): Array<[string, StoredSnapshot]> {
    return [...this.entries];
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

  /** A stored record as the engine takes it back: its snapshot, or its delete marker. */
  recovered<V>(key: string, stored: StoredSnapshot): RecoveredKey<S, V> {
    const decoded = decodeSnapshot(this.where.format, stored.bytes, {
      topic: this.where.snapshotTopic,
      partition: this.where.partition,
      key,
      offset: stored.offset,
    });
    return isDeleteMarker(decoded) ? { key, deleted: { offset: decoded.offset } } : { key, snapshot: decoded };
  }
}
