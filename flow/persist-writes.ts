import { EmittedOutputs, outputCount, releaseOutputs } from '../core/emitted-outputs';
import { CommitLandedLateError, SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import { CommitBound } from './commit-bound';
import type { PersistPlan, Planned } from './persist-plan';
import type { PersistScope } from './persist-types';
import type { WriteBatchResult } from './ports';

/** What a persist's writes came to. */
export interface PersistTally {
  written: number;
  deletes: number;
  deadLetters: number;
  outputs: number;
  failed: number;
  evicted: number;
  fenced: boolean;
  /** A write's outcome came too late to go on (CommitLandedLateError): the partition must recover. */
  mustRecover: boolean;
  error: unknown;
  conflicts: string[];
  committedNow: number | undefined;
  commitError: unknown;
}

/**
 * Writes the planned keys in chunks of `maxWritesPerBatch`, each with the offset safe to commit
 * if it lands (CommitBound). Stops at a fence, and under the strict policy at the first failure.
 */
export async function writePlanned<S, V>(s: PersistScope<S, V>, plan: PersistPlan<S, V>, now: number, capturedNext: number, strict: boolean): Promise<PersistTally> {
  const { planned } = plan;
  const { keys, metrics: m } = s;
  const t: PersistTally = { written: 0, deletes: 0, deadLetters: 0, outputs: 0, failed: 0, evicted: plan.evicted, fenced: false, mustRecover: false, error: undefined, conflicts: [], committedNow: undefined, commitError: undefined };
  const bound = new CommitBound(
    planned.map((p) => p.oldHold),
    plan.othersMin,
    capturedNext,
  );
  const size = Math.max(1, s.persistence.maxWritesPerBatch);
  let attempted = 0;
  for (let from = 0; from < planned.length; from += size) {
    const chunk = planned.slice(from, from + size);
    attempted = from + chunk.length;
    let putsHold = Number.POSITIVE_INFINITY;
    for (const p of chunk) if (p.kind === 'put' && p.holdAfter < putsHold) putsHold = p.holdAfter;
    const commitOffset = bound.forChunk(from + chunk.length, putsHold, s.committed);
    // A purge leaves no marker: it may land only with a commit past the deletion (a replay from
    // below it would fold the key again from nothing). Later chunks' holds can keep this chunk's
    // commit below it; then the key gets its marker, purged once the committed offset passes it.
    const passes = Math.max(commitOffset ?? Number.NEGATIVE_INFINITY, s.committed);
    for (const p of chunk) if (p.kind === 'purge' && !(passes > p.offset)) p.kind = 'delete';
    for (const p of chunk) keys.writing.add(p.kf);
    let result: WriteBatchResult | undefined;
    const t0 = performance.now();
    try {
      result = await s.persistence.write({
        writes: chunk.map((p) => toWrite(s, p)),
        commitOffset,
      });
    } catch (err) {
      t.error = err;
      if (err instanceof SnapshotWriteFencedError) t.fenced = true;
      else if (err instanceof CommitLandedLateError) t.mustRecover = true;
    }
    for (const p of chunk) keys.writing.delete(p.kf);
    // Counted per chunk (a metric update costs more than the rest of a key's bookkeeping, and a
    // chunk may carry tens of thousands of outputs).
    let applied = 0;
    let notApplied = 0;
    let failed = 0;
    let landedOutputs: Map<string, number> | undefined;
    for (let i = 0; i < chunk.length; i++) {
      const p = chunk[i]!;
      const status = result?.statuses[i];
      if (status === 'applied') {
        t.written++;
        if (p.kind !== 'put') t.deletes++;
        if (p.outputs) {
          s.outputs.landed(outputCount(p.outputs));
          landedOutputs ??= new Map();
          for (const out of p.outputs) {
            if (out instanceof EmittedOutputs) {
              // A key's run of emitted outputs: counted per topic, not per output.
              for (let k = 0; k < out.topics.length; k++) countLanded(landedOutputs, out.topics[k]!, out.topicCounts[k]!);
              continue;
            }
            // Emitted records by topic, dead letters by reason (`\u0000` cannot start a topic name).
            const label = out.kind === 'emitted' ? out.topic : `\u0000${String(out.headers?.['kafka-flow-dead-letter-reason'] ?? 'unknown')}`;
            countLanded(landedOutputs, label, 1);
          }
          // Landed: their runs can hold later emits (of any key).
          releaseOutputs(p.outputs);
        }
        applied++;
        const size = result!.sizes?.[i];
        if (size !== undefined) keys.resize(p.kf, size);
        if (landed(s, p, now, capturedNext)) t.evicted++;
      } else {
        t.failed++;
        if (status === 'not-applied') notApplied++;
        else failed++;
        if (status === 'not-applied') t.conflicts.push(p.kf.key);
        notLanded(s, p);
      }
      bound.stillHolds(keys.live.get(p.kf.key) === p.kf ? p.kf.holding : undefined);
    }
    if (landedOutputs) {
      for (const [label, n] of landedOutputs) {
        if (label.startsWith('\u0000')) {
          t.deadLetters += n;
          m.deadLetters(label.slice(1)).inc(n);
        } else {
          t.outputs += n;
          m.outputs(label).inc(n);
        }
      }
    }
    if (applied > 0) m.persistedKeys('applied').inc(applied);
    if (notApplied > 0) {
      m.persistedKeys('not_applied').inc(notApplied);
      refused(s, t, chunk, result!.statuses);
    }
    if (failed > 0) m.persistedKeys('failed').inc(failed);
    if (result?.commitError !== undefined) {
      m.commits('failed').inc();
      if (result.commitError instanceof SnapshotWriteFencedError) {
        t.fenced = true;
        t.error = result.commitError;
      } else {
        t.commitError = result.commitError;
        if (strict) break;
      }
    }
    if (result?.committed && commitOffset !== undefined) {
      s.committed = Math.max(s.committed, commitOffset);
      t.committedNow = s.committed;
      m.commits('ok').inc();
      m.commitDuration.observe((performance.now() - t0) / 1000);
    }
    if (t.fenced || t.mustRecover || (strict && t.failed > 0)) break;
  }
  // Writes never attempted (the loop stopped early) go back to their keys untouched.
  for (let i = attempted; i < planned.length; i++) notLanded(s, planned[i]!);
  return t;
}

/**
 * Writes refused (`not-applied`: the store holds another owner's newer state of these keys, e.g.
 * Cassandra's LWT fence) mean the partition is no longer ours: a fence, whatever the persist and
 * ignorePersistErrors — it stops here, and what its keys hold goes with it. Their outputs were
 * produced before the refused writes (non-transactional backends produce outputs first); kept
 * pending, every later flush of this owner would produce them again. The next owner replays the
 * records from the committed offset and produces them again, once.
 */
function refused<S, V>(s: PersistScope<S, V>, t: PersistTally, chunk: readonly Planned<S, V>[], statuses: readonly string[]): void {
  t.fenced = true;
  t.error = new SnapshotWriteConflictError(s.topic, s.partition, t.conflicts);
  let outputs = 0;
  for (let i = 0; i < chunk.length; i++) if (statuses[i] === 'not-applied') outputs += outputCount(chunk[i]!.outputs);
  if (outputs > 0) {
    s.log.warn(
      { topic: s.topic, partition: s.partition, keys: t.conflicts.length, outputs },
      'writes refused: another owner holds newer state; the partition stops here, and the outputs produced with the refused writes are produced again by the next owner',
    );
  }
}

function countLanded(counts: Map<string, number>, label: string, n: number): void {
  if (n > 0) counts.set(label, (counts.get(label) ?? 0) + n);
}

/** The key write as planned (persist-plan.ts): never what the key has become since. */
function toWrite<S, V>(s: PersistScope<S, V>, p: Planned<S, V>) {
  const { key } = p.kf;
  if (p.kind === 'purge') return { key, purge: { offset: p.offset }, outputs: p.outputs };
  if (p.kind === 'delete') return { key, delete: { offset: p.offset }, events: p.events, addKey: p.addKey, outputs: p.outputs };
  return {
    key,
    snapshot: s.snapshotting ? (p.timers ? { state: p.state as S, offset: p.offset, timers: p.timers } : { state: p.state as S, offset: p.offset }) : undefined,
    events: p.events,
    addKey: p.addKey,
    outputs: p.outputs,
  };
}

/** A key's write landed. Returns true if the key was unloaded. */
function landed<S, V>(s: PersistScope<S, V>, p: Planned<S, V>, now: number, capturedNext: number): boolean {
  const { kf } = p;
  const { keys } = s;
  const unchanged = !kf.changedSinceWrite && !kf.busy;
  if (p.kind === 'purge') {
    kf.stored = false;
    kf.storedMarker = false;
    keys.unloaded.delete(kf.key);
    if (unchanged && kf.state === undefined) {
      kf.holding = undefined;
      keys.live.delete(kf.key);
    }
    // Revived meanwhile: its new state holds from its first record, as any new key's.
    return false;
  }
  if (p.kind === 'delete') {
    // The marker stays in memory too (it skips a replay's older records) until its purge.
    kf.stored = true;
    kf.storedMarker = true;
    keys.unloaded.delete(kf.key);
    if (!kf.changedSinceWrite) kf.markClean();
    if (unchanged && kf.state === undefined) {
      kf.holding = undefined;
      kf.flushedClock = now - keys.epoch;
      return false;
    }
    // Revived by records folded while the delete was in flight: the new state is unpersisted.
    kf.holding = capturedNext;
    return false;
  }
  kf.stored = true;
  kf.storedMarker = false;
  if (!kf.changedSinceWrite) kf.markClean();
  kf.due = false;
  keys.markPersisted(kf, now, p.holdAfter);
  if (kf.unload && unchanged && !kf.dirty) {
    keys.evict(kf);
    return true;
  }
  return false;
}

/** A key's write failed, was refused, or was never attempted. */
function notLanded<S, V>(s: PersistScope<S, V>, p: Planned<S, V>): void {
  const { kf } = p;
  const { policy } = s;
  // The key keeps holding its old offset (frozen, never corrupt); its journal events and dead
  // letters go back in front of any added since, to be written next time.
  if (p.events && kf.events) kf.events = p.events.concat(kf.events);
  if (p.outputs) kf.outputs = kf.outputs ? p.outputs.concat(kf.outputs) : p.outputs;
  kf.due = false;
  kf.unload = false;
  if (kf.timerAt === undefined && Number.isFinite(policy.fireEvery)) kf.timerAt = s.clock.now() - s.keys.epoch + policy.fireEvery;
  // A delete marker that did not land is written next time (the key keeps holding meanwhile).
  if (kf.state === undefined && !kf.stored && !kf.dirty && !kf.busy) s.keys.live.delete(kf.key);
}
