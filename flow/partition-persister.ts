import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import { OffsetCommitFailedError, PersistFailedError } from './errors';
import { offsetText } from './offsets';
import { type PersistPlan, planPersist } from './persist-plan';
import { type PersistReason, type PersistResult, type PersistScope, timed } from './persist-types';
import { type PersistTally, writePlanned } from './persist-writes';

export interface PartitionPersisterOptions<S, V> extends PersistScope<S, V> {
  /** One past the last offset the fold has handled (read live: the fold goes on while writes are in flight). */
  readonly position: () => number;
  /** Stops the partition (PartitionFlow's failure); returns the error. */
  readonly fail: (err: unknown) => unknown;
}

/**
 * One partition's persists: `planPersist` chooses the keys (persist-plan.ts), `writePlanned`
 * writes them in chunks of the backend's maxWritesPerBatch, each with the offset CommitBound
 * allows (persist-writes.ts), then the error policy decides what a failure or a fence does, and
 * the offset every key now allows is committed. Owns the committed offset. PartitionFlow runs
 * one persist at a time.
 */
export class PartitionPersister<S, V> {
  /** What the stages share; its `committed` is the partition's committed offset. */
  private readonly s: PersistScope<S, V>;
  private readonly position: () => number;
  private readonly fail: (err: unknown) => unknown;

  constructor(options: PartitionPersisterOptions<S, V>) {
    const { position, fail, ...scope } = options;
    this.s = scope;
    this.position = position;
    this.fail = fail;
  }

  /** The last committed offset (the offset at assignment until a commit lands). */
  get committed(): number {
    return this.s.committed;
  }

  /** The offset it is safe to commit now: the smallest held offset, or the position when no key holds. */
  committable(): number {
    return this.s.keys.committable(this.position());
  }

  /** One persist: choose the keys, write them in chunks with the offsets safe to commit, then apply the error policy. */
  async run(now: number, reason: PersistReason): Promise<PersistResult> {
    const started = performance.now();
    const strict = timed(reason) && !this.s.policy.ignorePersistErrors;
    const capturedNext = this.position();
    let plan: PersistPlan<S, V>;
    try {
      plan = planPersist(this.s, now, reason, capturedNext);
    } catch (err) {
      // A key that cannot be planned (a corrupt snapshot decoded now, a broken invariant) stops
      // the partition before anything is written.
      throw this.fail(err);
    }
    let tally: PersistTally;
    try {
      tally = await writePlanned(this.s, plan, now, capturedNext, strict);
    } finally {
      this.s.outputs.afterWrites(now, this.s.keys.live.values());
    }
    const stopped = this.applyErrorPolicy(tally, reason, strict);
    if (stopped) return stopped;
    const fenced = await this.commitCommittable(tally, reason, strict);
    if (fenced) return fenced;

    this.s.metrics.persists(reason, tally.failed > 0 ? 'failed' : 'ok').inc();
    this.s.metrics.persistDuration(reason).observe((performance.now() - started) / 1000);
    if (tally.evicted > 0) this.s.metrics.keysEvicted.inc(tally.evicted);
    this.s.metrics.keysLive.set(this.s.keys.live.size);
    return {
      committed: tally.committedNow,
      written: tally.written,
      deleted: tally.deletes,
      deadLetters: tally.deadLetters,
      outputs: tally.outputs,
      failed: tally.failed,
      evicted: tally.evicted,
      fenced: false,
    };
  }

  /**
   * The error policy. A fence stops the partition (thrown for a periodic persist, reported for a
   * revoke or shutdown), and so does a commit that landed late (CommitLandedLateError, whatever
   * ignorePersistErrors says: the partition recovers from what landed). A failed write or offset
   * commit throws under the strict policy (a periodic persist without ignorePersistErrors) and
   * stops the partition; otherwise it is logged
   * and the keys keep holding their offsets, to be written next time.
   */
  private applyErrorPolicy(t: PersistTally, reason: PersistReason, strict: boolean): PersistResult | undefined {
    if (t.fenced) {
      this.fail(t.error);
      this.s.metrics.persists(reason, 'failed').inc();
      // `keys`: the key writes the refused chunk carried (0: only an offset commit was refused).
      this.s.log.warn({ topic: this.s.topic, partition: this.s.partition, reason, keys: t.failed, err: t.error }, 'persist fenced: partition stopped');
      if (timed(reason)) throw t.error;
      return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
    }
    if (t.mustRecover) {
      // Not a fence (the partition is still ours) and not a failure to retry in place: what
      // landed is known only to the store now, so the partition recovers from it.
      this.fail(t.error);
      this.s.metrics.persists(reason, 'failed').inc();
      if (timed(reason)) throw t.error;
      this.s.log.warn({ topic: this.s.topic, partition: this.s.partition, err: t.error }, 'persist stopped the partition: it recovers from what landed');
      return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: false };
    }
    if (t.failed > 0) {
      const cause = t.error ?? new SnapshotWriteConflictError(this.s.topic, this.s.partition, t.conflicts);
      if (strict) {
        this.s.metrics.persists(reason, 'failed').inc();
        const typed = t.error === undefined ? cause : new PersistFailedError(this.s.topic, this.s.partition, t.failed, cause);
        throw this.fail(typed);
      }
      this.s.log.warn(
        { topic: this.s.topic, partition: this.s.partition, failed: t.failed, err: cause },
        'persist failed; the keys keep holding their offsets and are retried later',
      );
    }
    if (t.commitError !== undefined) {
      if (strict) {
        this.s.metrics.persists(reason, 'failed').inc();
        throw this.fail(new OffsetCommitFailedError(this.s.topic, this.s.partition, offsetText(this.committable()), t.commitError));
      }
      this.s.log.warn({ topic: this.s.topic, partition: this.s.partition, err: t.commitError }, 'offset commit failed');
    }
    return undefined;
  }

  /**
   * After the writes: commits the offset every key now allows, when it is past what the chunks
   * committed (e.g. the keys written were not the lowest holds, or nothing needed writing).
   */
  private async commitCommittable(t: PersistTally, reason: PersistReason, strict: boolean): Promise<PersistResult | undefined> {
    const c = this.committable();
    if (c <= this.s.committed || t.commitError !== undefined) return undefined;
    const t0 = performance.now();
    try {
      const r = await this.s.persistence.write({ writes: [], commitOffset: c });
      if (r.committed) {
        this.s.committed = c;
        t.committedNow = c;
        this.s.metrics.commits('ok').inc();
        this.s.metrics.commitDuration.observe((performance.now() - t0) / 1000);
      }
    } catch (err) {
      this.s.metrics.commits('failed').inc();
      if (err instanceof SnapshotWriteFencedError) {
        this.fail(err);
        if (timed(reason)) throw err;
        return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
      }
      if (strict) throw this.fail(new OffsetCommitFailedError(this.s.topic, this.s.partition, offsetText(c), err));
      this.s.log.warn({ topic: this.s.topic, partition: this.s.partition, offset: c, err }, 'offset commit failed');
    }
    return undefined;
  }
}
