/**
 * Each key's latest snapshot record of one partition, read from the local state store on demand
 * instead of held in memory (the bounded state cache: docs/local-state.md). The store is written
 * after each transaction lands, in order; until a write is in the store its changes are kept here
 * (`pending`), so a key read at any moment gets its latest landed record. A change leaves
 * `pending` once the store holds it and no later change of the key is waiting.
 */
import type { KeyTimer } from '../../core/persistence-types';
import type { DueLook } from '../../flow/ports';
import type { LocalPartitionStore } from './local-state';
import { recordTimers } from './record-timers';
import type { StoredSnapshot } from './recovery';
import { SnapshotCache, type SnapshotUpdate, type Where } from './snapshot-cache';

export class StoreSnapshotCache<S> extends SnapshotCache<S> {
  /** Landed changes not in the store yet, newest per key (null: deleted). */
  private readonly pending = new Map<string, StoredSnapshot | null>();
  /** The timers of pending changes, read once each (a full restore's records wait here until the store has them). */
  private readonly pendingTimers = new WeakMap<StoredSnapshot, readonly KeyTimer[] | undefined>();

  constructor(
    where: Where<S>,
    private readonly store: LocalPartitionStore,
  ) {
    super(where);
  }

  /** The store's entries (as of its last write). */
  override get size(): number {
    return this.store.size;
  }

  /** Changes landed in Kafka and not in the store yet. */
  get waiting(): number {
    return this.pending.size;
  }

  override get(key: string): StoredSnapshot | undefined {
    const p = this.pending.get(key);
    if (p !== undefined) return p ?? undefined;
    return this.store.get(key);
  }

  override has(key: string): boolean {
    const p = this.pending.get(key);
    if (p !== undefined) return p !== null;
    return this.store.has(key);
  }

  /**
   * The keys not held in memory with a timer due in the look's range, at most `limit`: the store's
   * due-time index, and the changes not in the store yet (their timers are the key's, whatever the
   * index says), which are always looked at whole. With how far no other key out of memory is due.
   */
  dueKeys(look: DueLook): { keys: string[]; next: number } {
    const { time, until, limit, inMemory } = look;
    const skip = (key: string) => inMemory(key) || this.pending.has(key);
    const keys: string[] = [];
    let next = this.store.nextDue(time, until, skip);
    for (const [key, stored] of this.pending) {
      if (stored === null || inMemory(key)) continue;
      for (const t of this.timersOf(stored) ?? []) {
        if (t.time !== time) continue;
        if (t.at > until) next = Math.min(next, t.at);
        else if (keys.length < limit && keys[keys.length - 1] !== key) keys.push(key);
      }
    }
    return { keys: keys.concat(this.store.dueKeys({ time, after: look.after, until, limit: limit - keys.length, skip })), next };
  }

  private timersOf(stored: StoredSnapshot): readonly KeyTimer[] | undefined {
    if (this.pendingTimers.has(stored)) return this.pendingTimers.get(stored);
    const timers = recordTimers(stored.bytes);
    this.pendingTimers.set(stored, timers);
    return timers;
  }

  /** Nothing is enumerated: keys are read when asked for. */
  override all(): IterableIterator<[string, StoredSnapshot]> {
    return new Map<string, StoredSnapshot>().entries();
  }

  /** What a recovery read is written to the store (the restorer does that): nothing to keep here. */
  override replace(_entries: Map<string, StoredSnapshot>): void {}

  /** Changes that landed: kept until the store has them (`inStore`). */
  override apply(updates: readonly SnapshotUpdate[]): void {
    for (const [key, stored] of updates) this.pending.set(key, stored ?? null);
  }

  /** A local write committed these changes: the store answers for them now, unless a later change waits. */
  inStore(updates: readonly SnapshotUpdate[]): void {
    for (const [key, stored] of updates) {
      if (this.pending.get(key) === (stored ?? null)) this.pending.delete(key);
    }
  }
}
