import { SnapshotWriteConflictError, SnapshotWriteFencedError } from '../core/fence-errors';
import type { Logger } from '../core/logger';
import type { PersistenceMode } from '../core/persistence-types';
import type { Clock } from './clock';
import { OffsetCommitFailedError, PersistFailedError } from './errors';
import type { PartitionMetrics } from './metrics';
import { formatOffset } from './offsets';
import type { PartitionKeys } from './partition-keys';
import type { PendingOutputs } from './pending-outputs';
import { planPersist } from './persist-plan';
import { type PersistReason, type PersistResult, type PersistScope, timed } from './persist-types';
import { type PersistTally, writePlanned } from './persist-writes';
import type { PartitionPersistence } from './ports';
import type { TimerPolicy } from './timers';

export interface PartitionPersisterOptions<S, V> {
  readonly topic: string;
  readonly partition: number;
  readonly persistence: PartitionPersistence<S, V>;
  readonly mode: PersistenceMode;
  readonly snapshotting: boolean;
  readonly policy: TimerPolicy;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: PartitionMetrics;
  readonly keys: PartitionKeys<S, V>;
  readonly outputs: PendingOutputs;
  /** The committed offset when the partition was assigned. */
  readonly committed: number;
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
export class PartitionPersister<S, V> implements PersistScope<S, V> {
  readonly topic: string;
  readonly partition: number;
  readonly persistence: PartitionPersistence<S, V>;
  readonly mode: PersistenceMode;
  readonly snapshotting: boolean;
  readonly policy: TimerPolicy;
  readonly clock: Clock;
  readonly log: Logger;
  readonly m: PartitionMetrics;
  readonly keys: PartitionKeys<S, V>;
  readonly outputs: PendingOutputs;
  committed: number;
  private readonly position: () => number;
  private readonly fail: (err: unknown) => unknown;

  constructor(o: PartitionPersisterOptions<S, V>) {
    this.topic = o.topic;
    this.partition = o.partition;
    this.persistence = o.persistence;
    this.mode = o.mode;
    this.snapshotting = o.snapshotting;
    this.policy = o.policy;
    this.clock = o.clock;
    this.log = o.log;
    this.m = o.metrics;
    this.keys = o.keys;
    this.outputs = o.outputs;
    this.committed = o.committed;
    this.position = o.position;
    this.fail = o.fail;
  }

  /** The offset it is safe to commit now: the smallest held offset, or the position when no key holds. */
  committable(): number {
    return this.keys.committable(this.position());
  }

  /** One persist: choose the keys, write them in chunks with the offsets safe to commit, then apply the error policy. */
  async run(now: number, reason: PersistReason): Promise<PersistResult> {
    const started = performance.now();
    const strict = timed(reason) && !this.policy.ignorePersistErrors;
    const capturedNext = this.position();
    const plan = planPersist(this, now, reason, capturedNext);
    let tally: PersistTally;
    try {
      tally = await writePlanned(this, plan, now, capturedNext, strict);
    } finally {
      this.outputs.afterWrites(now, this.keys.live.values());
    }
    const stopped = this.applyErrorPolicy(tally, reason, strict);
    if (stopped) return stopped;
    const fenced = await this.commitCommittable(tally, reason, strict);
    if (fenced) return fenced;

    this.m.persists(reason, tally.failed > 0 ? 'failed' : 'ok').inc();
    this.m.persistDuration(reason).observe((performance.now() - started) / 1000);
    if (tally.evicted > 0) this.m.keysEvicted.inc(tally.evicted);
    this.m.keysLive.set(this.keys.live.size);
    return {
      committed: tally.committedNow === undefined ? undefined : formatOffset(tally.committedNow),
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
   * revoke or shutdown). A failed write or offset commit throws under the strict policy (a
   * periodic persist without ignorePersistErrors) and stops the partition; otherwise it is logged
   * and the keys keep holding their offsets, to be written next time.
   */
  private applyErrorPolicy(t: PersistTally, reason: PersistReason, strict: boolean): PersistResult | undefined {
    if (t.fenced) {
      this.fail(t.error);
      this.m.persists(reason, 'failed').inc();
      if (timed(reason)) throw t.error;
      this.log.warn({ topic: this.topic, partition: this.partition, err: t.error }, 'persist fenced: partition stopped');
      return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
    }
    if (t.failed > 0) {
      const cause = t.error ?? new SnapshotWriteConflictError(this.topic, this.partition, t.conflicts);
      if (strict) {
        this.m.persists(reason, 'failed').inc();
        const typed = t.error === undefined ? cause : new PersistFailedError(this.topic, this.partition, t.failed, cause);
        throw this.fail(typed);
      }
      this.log.warn(
        { topic: this.topic, partition: this.partition, failed: t.failed, err: cause },
        'persist failed; the keys keep holding their offsets and are retried later',
      );
    }
    if (t.commitError !== undefined) {
      if (strict) {
        this.m.persists(reason, 'failed').inc();
        throw this.fail(new OffsetCommitFailedError(this.topic, this.partition, formatOffset(this.committable()), t.commitError));
      }
      this.log.warn({ topic: this.topic, partition: this.partition, err: t.commitError }, 'offset commit failed');
    }
    return undefined;
  }

  /**
   * After the writes: commits the offset every key now allows, when it is past what the chunks
   * committed (e.g. the keys written were not the lowest holds, or nothing needed writing).
   */
  private async commitCommittable(t: PersistTally, reason: PersistReason, strict: boolean): Promise<PersistResult | undefined> {
    const c = this.committable();
    if (c <= this.committed || t.commitError !== undefined) return undefined;
    const t0 = performance.now();
    try {
      const r = await this.persistence.write({ writes: [], commitOffset: c });
      if (r.committed) {
        this.committed = c;
        t.committedNow = c;
        this.m.commits('ok').inc();
        this.m.commitDuration.observe((performance.now() - t0) / 1000);
      }
    } catch (err) {
      this.m.commits('failed').inc();
      if (err instanceof SnapshotWriteFencedError) {
        this.fail(err);
        if (timed(reason)) throw err;
        return { committed: undefined, written: t.written, failed: t.failed, evicted: t.evicted, fenced: true };
      }
      if (strict) throw this.fail(new OffsetCommitFailedError(this.topic, this.partition, formatOffset(c), err));
      this.log.warn({ topic: this.topic, partition: this.partition, offset: c, err }, 'offset commit failed');
    }
    return undefined;
  }
}
