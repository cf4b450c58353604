import type { KeyTimer } from '../core/persistence-types';
import { PartitionStateError } from './errors';
import type { KeyFlow } from './key-flow';
import type { PersistReason, PersistScope } from './persist-types';
import type { PendingOutput } from '../core/emitted-outputs';
import type { FlowRecord } from './record';

/**
 * One key write in flight, and what to do with the key when it lands. `put`: its state;
 * `delete`: its delete marker (the fold returned no state); `purge`: the marker goes, the
 * committed offset having passed it (or passing it in the same transaction).
 *
 * What the write carries (state, offset, whether the key is new to the store) is taken when the
 * persist is planned: the fold goes on while earlier chunks are in flight, and a key deleted or
 * revived meanwhile must be written as it was at the planned position, never as it is when its
 * chunk is sent. The state is the fold's own object (states are immutable, see Fold).
 */
export interface Planned<S, V> {
  readonly kf: KeyFlow<S, V>;
  readonly oldHold: number;
  /** What a put holds once landed: the persist's captured position, or a folding key's first record not folded yet. */
  readonly holdAfter: number;
  /** A purge becomes a `delete` when its chunk cannot commit past the deletion (persist-writes.ts). */
  kind: 'put' | 'delete' | 'purge';
  /** The offset of the last record folded into the key when planned: the snapshot's, or the marker's. */
  readonly offset: number;
  /** A put's state when planned. */
  readonly state: S | undefined;
  /** A put's pending timers when planned (written with the state). */
  readonly timers: readonly KeyTimer[] | undefined;
  /** Nothing was stored for the key when planned (the store adds it to its keys). */
  readonly addKey: boolean;
  readonly events: FlowRecord<V>[] | undefined;
  readonly outputs: PendingOutput[] | undefined;
}

/** What one persist writes, and the smallest hold among the keys it leaves alone. */
export interface PersistPlan<S, V> {
  readonly planned: Planned<S, V>[];
  readonly othersMin: number;
  /** Keys unloaded while planning (nothing to write). */
  readonly evicted: number;
}

/**
 * The keys this persist writes (in `planned`), and the smallest hold among those it leaves alone
 * (`othersMin`). Keys with nothing to write are marked persisted (or unloaded) right here.
 */
export function planPersist<S, V>(s: PersistScope<S, V>, now: number, reason: PersistReason, capturedNext: number): PersistPlan<S, V> {
  const { keys, policy } = s;
  const transient = s.mode === 'none';
  // A transient flow has nothing to write: "flushing" it only lets the commit pass its keys
  // (kafka-flow's no-op flush), so it does that only when asked to flush on revoke.
  const everything =
    reason === 'periodic' ? false : reason === 'shutdown' && !transient ? true : policy.flushOnRevoke;
  const planned: Planned<S, V>[] = [];
  const deleted: KeyFlow<S, V>[] = [];
  let othersMin = Number.POSITIVE_INFINITY;
  let evicted = 0;
  // A periodic persist also takes every key whose persistEvery has passed, not only those a
  // timer has marked since: a key's timer and the periodic persist run on their own clocks, and
  // waiting for the next timer would leave such a key (and the committed offset) a cycle behind.
  const every = policy.persistEvery;
  const persistedBefore = every === undefined ? Number.NEGATIVE_INFINITY : now - keys.epoch - every;

  for (const kf of [...keys.live.values()]) {
    const hold = kf.holding ?? Number.POSITIVE_INFINITY;
    // A key still folding (an async fold) is written as of its last folded record, and then
    // holds its first record not folded yet; one being read back, or deleted, waits.
    const unfolded = kf.x?.at;
    const busy = kf.busy;
    if (keys.writing.has(kf) || (busy && (unfolded === undefined || !kf.hasState))) {
      othersMin = Math.min(othersMin, hold);
      continue;
    }
    const holdAfter = busy ? unfolded! : capturedNext;
    if (!kf.hasState) {
      if (kf.dirty) {
        // Deleted by the fold since the last write: a delete marker, or less (decided below).
        deleted.push(kf);
      } else if (kf.stored && s.committed > kf.lastOffset) {
        // No replay can start at or below the marker any more: purge it.
        kf.beginWrite();
        planned.push(plannedWrite(kf, hold, capturedNext, 'purge', undefined, undefined));
      } else {
        // The marker stands for everything this key has seen: it holds nothing.
        kf.holding = undefined;
        if (!kf.stored) keys.live.delete(kf.key);
      }
      continue;
    }
    const selected =
      reason === 'periodic'
        ? kf.due || kf.unload || kf.flushedClock <= persistedBefore
        : reason === 'outputs'
          ? kf.outputs !== undefined && kf.outputs.length > 0
          : reason === 'idle' || reason === 'takeover' || everything;
    if (!selected || (transient && !kf.unload && (reason === 'periodic' || reason === 'idle' || reason === 'takeover'))) {
      othersMin = Math.min(othersMin, hold);
      continue;
    }
    if (transient || !kf.dirty) {
      // Nothing to write: everything before `holdAfter` is already persisted for this key
      // (or, transient, never will be: kafka-flow's no-op flush).
      kf.due = false;
      keys.markPersisted(kf, now, holdAfter);
      if (kf.unload && !busy) {
        keys.evict(kf);
        evicted++;
      } else {
        othersMin = Math.min(othersMin, holdAfter);
      }
      continue;
    }
    if (kf.state === undefined) throw undefinedPut(s, kf, busy, hold, holdAfter);
    kf.beginWrite();
    planned.push(plannedWrite(kf, hold, holdAfter, 'put', takeEvents(kf), takeOutputs(kf)));
  }
  planDeletes(s, deleted, planned, othersMin, capturedNext);
  return { planned, othersMin, evicted };
}

/**
 * The keys the fold deleted since their last write. A replay must not start between a key's
 * first unpersisted record (its hold) and its deleting record: so it gets a delete marker —
 * unless every hold that can remain after this persist is above its deleting offset, in which
 * case the committed offset passes the deletion at once and the key is purged directly (or, never
 * stored, simply forgotten). Holds that can remain: other keys' current holds (a write may fail),
 * and the holds of deleted keys that get a marker (their write may fail too). A direct purge needs
 * the purge and the commit to land together (`atomicCommit`, a Kafka transaction): elsewhere the
 * purge could land and the commit fail (or the process die in between), and a replay from the
 * old committed offset would fold the key again from nothing — so there the key gets its marker.
 * The same holds for a persist of several transactions: a chunk's commit is capped by the holds of
 * later chunks' writes, so writePlanned turns a purge into a marker when its own chunk's commit
 * does not pass the deletion.
 */
function planDeletes<S, V>(s: PersistScope<S, V>, deleted: readonly KeyFlow<S, V>[], planned: Planned<S, V>[], othersMin: number, capturedNext: number): void {
  if (deleted.length === 0) return;
  let floor = othersMin;
  for (const p of planned) if (p.oldHold < floor) floor = p.oldHold;
  // A key with dead letters to produce is written (a marker) whatever the offsets say.
  const marked = new Set<KeyFlow<S, V>>();
  for (const kf of deleted) {
    if (!kf.x?.outputs?.length) continue;
    marked.add(kf);
    const hold = kf.holding ?? Number.POSITIVE_INFINITY;
    if (hold < floor) floor = hold;
  }
  for (let grew = true; grew; ) {
    grew = false;
    for (const kf of deleted) {
      if (marked.has(kf) || kf.lastOffset < floor) continue;
      marked.add(kf);
      grew = true;
      const hold = kf.holding ?? Number.POSITIVE_INFINITY;
      if (hold < floor) floor = hold;
    }
  }
  for (const kf of deleted) {
    const hold = kf.holding ?? Number.POSITIVE_INFINITY;
    if (marked.has(kf) || kf.stored) {
      // A direct purge is safe only if it cannot land without the commit that passes the deletion.
      const purge = !marked.has(kf) && s.persistence.atomicCommit === true;
      kf.beginWrite();
      planned.push(plannedWrite(kf, hold, capturedNext, purge ? 'purge' : 'delete', takeEvents(kf), takeOutputs(kf)));
    } else {
      if (kf.events) kf.events = [];
      kf.holding = undefined;
      kf.markClean();
      s.keys.live.delete(kf.key);
    }
  }
}

/**
 * A key with a state (`hasState`) whose state reads as undefined: an engine invariant broken. Stops
 * the partition before anything is written (it recovers from the store), with what the key's
 * bookkeeping said — never its key or state — so that an occurrence tells where it came from.
 */
function undefinedPut<S, V>(s: PersistScope<S, V>, kf: KeyFlow<S, V>, busy: boolean, hold: number, holdAfter: number): PartitionStateError {
  const facts = {
    hasState: kf.hasState,
    lazy: kf.lazy,
    busy,
    folding: kf.x?.at !== undefined,
    queued: kf.x?.queue?.length ?? 0,
    stored: kf.stored,
    dirty: kf.dirty,
    changed: kf.changedSinceWrite,
    outputs: kf.outputs?.length ?? 0,
    lastOffset: kf.lastOffset,
    hold,
    holdAfter,
    committed: s.committed,
    live: s.keys.live.get(kf.key) === kf,
    writing: s.keys.writing.has(kf),
  };
  return new PartitionStateError(
    `topic "${s.topic}" partition ${s.partition}: a key to persist has no state although it should (engine invariant; please report): ${JSON.stringify(facts)}`,
  );
}

function plannedWrite<S, V>(
  kf: KeyFlow<S, V>,
  oldHold: number,
  holdAfter: number,
  kind: Planned<S, V>['kind'],
  events: FlowRecord<V>[] | undefined,
  outputs: PendingOutput[] | undefined,
): Planned<S, V> {
  const put = kind === 'put';
  return { kf, oldHold, holdAfter, kind, offset: kf.lastOffset, state: put ? kf.state : undefined, timers: put ? kf.timers : undefined, addKey: !kf.stored || kf.storedMarker, events, outputs };
}

function takeEvents<S, V>(kf: KeyFlow<S, V>): FlowRecord<V>[] | undefined {
  if (!kf.events || kf.events.length === 0) return undefined;
  const taken = kf.events;
  kf.events = [];
  return taken;
}

function takeOutputs<S, V>(kf: KeyFlow<S, V>): PendingOutput[] | undefined {
  const taken = kf.outputs;
  kf.outputs = undefined;
  kf.tidy();
  return taken && taken.length > 0 ? taken : undefined;
}
