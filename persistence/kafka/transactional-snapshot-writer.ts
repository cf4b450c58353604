/**
 * Transactional mode: every batch is ONE Kafka transaction of this partition's producer
 * (transactional.id `<prefix>-snapshot-<p>`): the snapshot records plus the input-offset commit
 * under the consumer generation read live for each transaction. Every transaction commits an
 * offset — the batch's, or the last committed one, seeded with the offset at assignment — so every
 * write, the very first included, is gated by the broker's generation check (KIP-447). A fence
 * stops the partition. A commit without an answer — none in time, the connection lost or the
 * request timed out after EndTxn went out (SnapshotCommitTimeoutError) — is not a rejection: the
 * producer is rebuilt (its initialization completes or aborts the transaction) and the outcome is
 * learned before going on; when it cannot be learned at once, before the next write, which sends
 * nothing until it is — and if that finds it landed with outputs that had gone back to their keys,
 * the partition stops (CommitLandedLateError) rather than produce them twice.
 */
import { CommitLandedLateError, SnapshotWriteFencedError } from '../../core/fence-errors';
import { outputCount, type PendingOutput } from '../../core/emitted-outputs';
import { traced, tracingOn } from '../../core/tracing';
import type { WriteBatch, WriteBatchResult } from '../../flow/ports';
import { offsetToKafka } from '../../flow/offsets';
import { type SentRecords, SnapshotCommitTimeoutError } from '../../kafka/errors';
import type { CommitRequest, CommitResult, SnapshotMessage } from '../../kafka/transactional-writer';
import type { MessagePool, OutputTopics } from './dead-letter';
import { MissingGenerationError } from './errors';
import type { LocalStateManager } from './local-state-manager';
import { allApplied, type PreparedBatch } from './snapshot-batch';
import { SnapshotWriter, type WriterContext } from './snapshot-writer';

/** The consumer generation a transaction commits its offset under. */
export interface WriteGeneration {
  readonly generationId: number;
  readonly memberId: string;
  /** The partitions this generation assigns to the member, by topic; when given, checked before each transaction. */
  readonly assignment?: Readonly<Record<string, readonly number[]>>;
}

/**
 * Read for each transaction, never cached: a rebalance that keeps our partitions still bumps it.
 * `next` (cooperative rebalancing): after a commit the group refused for generation `used` — the
 * group moved on while the transaction was under way, keeping the partition here or not — the
 * generation of the group's next join if the owner still holds the partition in it (the
 * transaction is then redone under it), or undefined: a fence.
 */
export type GenerationSource = (() => WriteGeneration | undefined) & {
  readonly next?: (used: WriteGeneration) => Promise<WriteGeneration | undefined>;
};

/** One partition's transactions (TransactionalWriter). */
export interface SnapshotTransactions {
  readonly transactionalId: string;
  init(): Promise<void>;
  commit(request: CommitRequest): Promise<CommitResult>;
  close(): Promise<void>;
  /** The transaction protocol in use once initialized (2: KIP-890 part 2); absent or undefined: not known. */
  transactionVersion?(): 1 | 2 | undefined;
}

/** Learns the outcome of a transaction whose commit went unanswered, once its producer was rebuilt. */
export interface OutcomeProbe {
  /** Whether the record at `sent.baseOffset` is visible to read_committed readers. */
  recordCommitted(sent: SentRecords): Promise<boolean>;
  /** The group's committed offset of the input partition (require_stable), undefined if none. */
  committedOffset(): Promise<number | undefined>;
}

export interface TransactionalWriterParts {
  readonly transactions: SnapshotTransactions;
  readonly generation: GenerationSource;
  readonly probe: OutcomeProbe;
  /** Where the writes' outputs (dead letters) go: in the transaction. */
  readonly outputs?: OutputTopics;
  /** The local state store, mirroring every landed transaction. */
  readonly local?: LocalStateManager;
}

interface Unsettled {
  readonly error: SnapshotCommitTimeoutError;
  readonly offset: number;
  readonly prepared: PreparedBatch;
  /**
   * How many outputs the transaction carried, counted when it was sent: the engine appends a key's
   * later outputs to the same pending run, so counting `prepared.outputs` later would count those too.
   */
  readonly outputs: number;
}

export class TransactionalSnapshotWriter<S, V> extends SnapshotWriter<S, V> {
  /** How long the last fence (producer initialization) took. */
  fenceMs = 0;
  private unsettled: Unsettled | undefined;
  /** The emitted outputs' message objects, reused by each transaction (see MessagePool). */
  private readonly pool: MessagePool = { messages: [] };
  private poolInUse = false;
  /** Set when an unanswered commit turned out landed too late to go on: every later write fails with it. */
  private landedLate: CommitLandedLateError | undefined;

  constructor(
    c: WriterContext<S>,
    private readonly t: TransactionalWriterParts,
  ) {
    super(c);
  }

  get transactionalId(): string {
    return this.t.transactions.transactionalId;
  }

  /**
   * Initializes the partition's producer, which fences every earlier producer of its
   * transactional.id and aborts whatever transaction a crashed owner left open.
   */
  fenceNow(): Promise<number> {
    const { input } = this.c;
    const fields = { flow: this.labels.flow, topic: input.topic, partition: input.partition, transactionalId: this.t.transactions.transactionalId };
    return traced('kafka-flow.fence', fields, async (span) => {
      try {
        const ms = await this.fenceOnce();
        span?.set({ outcome: 'initialized' });
        return ms;
      } catch (err) {
        span?.set(err instanceof SnapshotWriteFencedError ? { outcome: 'fenced', fenced: true } : { outcome: 'failed' });
        throw err;
      }
    });
  }

  private async fenceOnce(): Promise<number> {
    const started = performance.now();
    try {
      await this.t.transactions.init();
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) throw this.onFence(err);
      throw err;
    }
    this.fenceMs = performance.now() - started;
    this.c.log.info({ ...this.where(), transactionalId: this.t.transactions.transactionalId, transactionVersion: this.t.transactions.transactionVersion?.(), ms: Math.round(this.fenceMs) }, 'snapshot producer initialized (fence)');
    return this.fenceMs;
  }

  async write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    if (this.fence) throw this.fence;
    if (this.landedLate) throw this.landedLate;
    if (this.unsettled) {
      // An earlier commit's outcome, learned only now. Its keys went back to the engine as not
      // landed, their outputs with them: if it did land, this batch may carry them again.
      const { offset, outputs } = this.unsettled;
      if ((await this.settle()) === 'committed' && outputs > 0) {
        this.landedLate = new CommitLandedLateError(this.c.input.topic, this.c.input.partition, offset, outputs);
        this.c.log.warn({ ...this.where(), offset, outputs }, 'the unanswered transaction landed after its outputs went back to their keys: the partition stops and recovers');
        throw this.landedLate;
      }
    }
    const generation = this.liveGeneration();
    const offset = Math.max(this.offsetToCommit, batch.commitOffset ?? 0);
    const prepared = this.prepare(batch);
    const started = performance.now();
    // The message pool serves one transaction at a time (writes of a partition come one at a time;
    // should one ever overlap another, it makes its own messages).
    const pool = this.poolInUse ? undefined : this.pool;
    if (pool) this.poolInUse = true;
    try {
      return await this.traceCommit(batch, prepared, offset, generation, started, pool);
    } finally {
      // The transaction is over (committed, aborted or its producer discarded): nothing reads its messages.
      if (pool) this.poolInUse = false;
    }
  }

  /** commitPrepared in a span of its own when tracing is on (one per transaction). */
  private traceCommit(batch: WriteBatch<S, V>, prepared: PreparedBatch, offset: number, generation: WriteGeneration, started: number, pool: MessagePool | undefined): Promise<WriteBatchResult> {
    if (!tracingOn()) return this.commitPrepared(batch, prepared, offset, generation, started, pool);
    const { input } = this.c;
    const fields = {
      flow: this.labels.flow,
      topic: input.topic,
      partition: input.partition,
      generation: generation.generationId,
      offset,
      snapshots: prepared.messages.length,
      outputs: outputCount(prepared.outputs),
      transactionalId: this.t.transactions.transactionalId,
    };
    return traced('kafka-flow.transaction', fields, async (span) => {
      try {
        const result = await this.commitPrepared(batch, prepared, offset, generation, started, pool);
        span?.set({ outcome: 'committed' });
        return result;
      } catch (err) {
        span?.set(err instanceof SnapshotWriteFencedError ? { outcome: 'fenced', fenced: true } : { outcome: err instanceof SnapshotCommitTimeoutError ? 'timeout' : 'failed' });
        throw err;
      }
    });
  }

  private async commitPrepared(batch: WriteBatch<S, V>, prepared: PreparedBatch, offset: number, generation: WriteGeneration, started: number, pool: MessagePool | undefined): Promise<WriteBatchResult> {
    const { input } = this.c;
    const outputs = prepared.outputs.length > 0 ? await this.outputMessages(prepared.outputs, pool) : [];
    const carried = outputCount(prepared.outputs);
    let result: CommitResult;
    try {
      const request = {
        messages: outputs.length > 0 ? prepared.messages.concat(outputs) : prepared.messages,
        offsets: [{ topic: input.topic, partition: input.partition, offset: offsetToKafka(offset) }],
      };
      let under = generation;
      for (;;) {
        try {
          result = await this.t.transactions.commit({ ...request, generation: { generationId: under.generationId, memberId: under.memberId } });
          break;
        } catch (err) {
          // The group moved to a new generation while the transaction was under way (aborted, nothing
          // landed): redone under the new one if it keeps the partition here (cooperative), else a fence.
          const next = err instanceof SnapshotWriteFencedError && err.reason === 'generation' ? await this.t.generation.next?.(under) : undefined;
          if (!next) throw err;
          this.c.log.info({ ...this.where(), from: under.generationId, to: next.generationId }, 'the group moved on during the transaction and kept the partition here: committing again under its new generation');
          under = next;
        }
      }
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) {
        this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'fenced' });
        throw this.onFence(err);
      }
      if (err instanceof SnapshotCommitTimeoutError) {
        this.stats.commitTimeouts++;
        this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'timeout' });
        this.c.log.warn({ ...this.where(), err }, 'snapshot transaction commit got no answer: rebuilding the producer to learn its outcome');
        this.unsettled = { error: err, offset, prepared, outputs: carried };
        if ((await this.settle()) === 'committed') return this.landed(batch, prepared, offset, started, undefined);
      } else {
        this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'failed' });
      }
      throw err;
    }
    this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'committed' });
    return this.landed(batch, prepared, offset, started, result.sent);
  }

  close(): Promise<void> {
    return this.t.transactions.close();
  }

  /** `sent`: where the records landed; undefined when settle() applied them already. */
  private landed(batch: WriteBatch<S, V>, prepared: PreparedBatch, offset: number, started: number, sent: readonly SentRecords[] | undefined): WriteBatchResult {
    if (sent) this.applyLanded(prepared, sent, this.t.local);
    this.offsetToCommit = Math.max(this.offsetToCommit, offset);
    this.count(prepared, started);
    return { statuses: allApplied(batch.writes), committed: batch.commitOffset !== undefined, sizes: prepared.sizes };
  }

  /**
   * A commit went unanswered: rebuild the producer (its initialization completes or aborts the
   * pending transaction), then find out which it was. Stays unsettled (and every write waits for
   * it) until the outcome is known.
   */
  private async settle(): Promise<'committed' | 'aborted'> {
    const u = this.unsettled!;
    try {
      await this.t.transactions.init();
    } catch (err) {
      if (err instanceof SnapshotWriteFencedError) {
        this.unsettled = undefined; // a newer owner settled it; nothing more of ours will land
        throw this.onFence(err);
      }
      throw err;
    }
    // A record of the transaction read back read_committed: its snapshot record on our partition,
    // or any record it sent (outputs only); without records, the committed offset tells.
    const witness = u.error.sent.find((s) => s.topic === this.c.snapshotTopic && s.partition === this.c.input.partition) ?? u.error.sent[0];
    let committed: boolean;
    if (witness) committed = await this.t.probe.recordCommitted(witness);
    else if (u.offset <= this.offsetToCommit) committed = true; // it re-committed a committed offset: nothing to learn
    else committed = ((await this.t.probe.committedOffset()) ?? -1) >= u.offset;
    this.unsettled = undefined;
    const outcome = committed ? 'committed' : 'aborted';
    this.c.metrics?.commitTimeouts.inc({ ...this.labels, outcome });
    if (committed) {
      this.applyLanded(u.prepared, u.error.sent, this.t.local);
      this.offsetToCommit = Math.max(this.offsetToCommit, u.offset);
    }
    this.c.log.warn({ ...this.where(), outcome, offset: u.offset }, `the unanswered snapshot transaction was ${outcome}`);
    return outcome;
  }

  private liveGeneration(): WriteGeneration {
    const { input } = this.c;
    const g = this.t.generation();
    if (!g || !Number.isInteger(g.generationId) || g.generationId < 0 || !g.memberId) {
      throw new MissingGenerationError(input.topic, input.partition);
    }
    if (g.assignment && !(g.assignment[input.topic] ?? []).includes(input.partition)) {
      throw this.onFence(
        new SnapshotWriteFencedError(input.topic, input.partition, `generation ${g.generationId} does not assign the partition to member ${g.memberId}`, {
          reason: 'not-assigned',
          transactionalId: this.t.transactions.transactionalId,
        }),
      );
    }
    return g;
  }

  private outputMessages(outputs: readonly PendingOutput[], pool: MessagePool | undefined): Promise<SnapshotMessage[]> {
    if (!this.t.outputs) throw new TypeError('this partition has no output topics: it cannot produce dead letters');
    return this.t.outputs.messages(outputs, this.c.input, pool);
  }

}
