/**
 * Snapshot writes and the input-offset commit of ONE partition in ONE Kafka transaction, fenced
 * twice: by the consumer generation (KIP-447: TxnOffsetCommit v3 carries generation and member
 * id, so the group coordinator rejects a stale owner's offsets) and by the producer epoch (the
 * per-partition transactional.id `<prefix>-snapshot-<partition>` is shared by every owner of the
 * partition, so a new owner's first transaction fences the old owner's producer and aborts what
 * it left open).
 *
 * A fence aborts the transaction (kafkajs does not: a commit after a failed sendOffsets would
 * publish the snapshots without the offsets) and discards the producer. A commit that gets no
 * answer tears the producer down; the next producer's initialization settles the transaction.
 */
import type { Producer, Transaction } from 'kafkajs';
import type { KafkaClient } from './client';
import { fenceReason, SnapshotCommitTimeout, SnapshotWriteFenced } from './errors';

export interface SnapshotMessage {
  topic: string;
  partition: number;
  key: string | Buffer;
  /** null is a tombstone (the key's state was deleted). */
  value: string | Buffer | null;
  headers?: Record<string, string | Buffer>;
}

/** The next offset to consume, committed for the group with the transaction. */
export interface OffsetToCommit {
  topic: string;
  partition: number;
  offset: string;
}

/** The consumer generation the write belongs to; our port always passes it. */
export interface WriteGeneration {
  generationId: number;
  memberId: string;
}

export interface TransactionalWriterOptions {
  client: KafkaClient;
  /** Unique per flow (the application id, plus a discriminator when one app runs several flows). */
  transactionalIdPrefix: string;
  /** The input partition this writer serves. */
  partition: number;
  /** The consumer group whose offsets are committed. */
  groupId: string;
  /** transaction.timeout.ms of the producer; default 60 s. */
  transactionTimeoutMs?: number;
  /** How long a commit may go unanswered before the producer is rebuilt; default 30 s. */
  commitTimeoutMs?: number;
}

export interface CommitRequest {
  messages: SnapshotMessage[];
  offsets: OffsetToCommit[];
  generation: WriteGeneration;
}

export function snapshotTransactionalId(prefix: string, partition: number): string {
  return `${prefix}-snapshot-${partition}`;
}

export class TransactionalWriter {
  readonly transactionalId: string;
  private readonly options: TransactionalWriterOptions;
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Producers created so far (1 + rebuilds after fences, timeouts and failures). */
  producersCreated = 0;

  constructor(options: TransactionalWriterOptions) {
    this.options = options;
    this.transactionalId = snapshotTransactionalId(options.transactionalIdPrefix, options.partition);
  }

  /**
   * Writes `messages` and commits `offsets` for the group in one transaction, under `generation`.
   * Commits of one writer run one at a time, in call order.
   * @throws SnapshotWriteFenced when a newer owner exists (nothing became visible)
   * @throws SnapshotCommitTimeout when the commit went unanswered (outcome unknown; producer rebuilt)
   */
  commit(request: CommitRequest): Promise<void> {
    const run = this.queue.then(() => this.commitNow(request));
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Disconnects the producer. An open transaction is left to the next owner's fence (or timeout). */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    await this.discardProducer();
  }

  private async commitNow({ messages, offsets, generation }: CommitRequest): Promise<void> {
    if (this.closed) throw new Error(`TransactionalWriter ${this.transactionalId} is closed`);
    const producer = await this.currentProducer();
    let transaction: Transaction | undefined;
    try {
      transaction = await producer.transaction();
      const byTopic = new Map<string, SnapshotMessage[]>();
      for (const m of messages) byTopic.set(m.topic, [...(byTopic.get(m.topic) ?? []), m]);
      if (byTopic.size > 0) {
        await transaction.sendBatch({
          topicMessages: [...byTopic].map(([topic, ms]) => ({
            topic,
            messages: ms.map(({ partition, key, value, headers }) => ({ partition, key, value, headers })),
          })),
        });
      }
      if (offsets.length > 0) {
        await transaction.sendOffsets({
          consumerGroupId: this.options.groupId,
          topics: groupOffsets(offsets),
          generationId: generation.generationId,
          memberId: generation.memberId,
        });
      }
    } catch (err) {
      await this.abortAndDiscard(transaction);
      const reason = fenceReason(err);
      if (reason) throw new SnapshotWriteFenced(reason, this.transactionalId, { cause: err });
      throw err;
    }

    const timeoutMs = this.options.commitTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const committing = transaction.commit();
    try {
      const outcome = await Promise.race([committing.then(() => 'committed' as const), timedOut]);
      if (outcome === 'timeout') {
        committing.catch(() => undefined); // its late answer is no longer anyone's business
        await this.discardProducer();
        throw new SnapshotCommitTimeout(this.transactionalId, timeoutMs);
      }
    } catch (err) {
      if (err instanceof SnapshotCommitTimeout) throw err;
      // A failed EndTxn leaves kafkajs's transaction state machine in COMMITTING: unusable.
      await this.discardProducer();
      const reason = fenceReason(err);
      if (reason) throw new SnapshotWriteFenced(reason, this.transactionalId, { cause: err });
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private async abortAndDiscard(transaction: Transaction | undefined): Promise<void> {
    try {
      if (transaction?.isActive()) await transaction.abort();
    } catch {
      // A producer-epoch fence fails the abort too; the new owner's init aborted it already.
    }
    await this.discardProducer();
  }

  private async currentProducer(): Promise<Producer> {
    if (this.producer) return this.producer;
    if (!this.connecting) {
      const producer = this.options.client.kafka.producer({
        transactionalId: this.transactionalId,
        idempotent: true,
        maxInFlightRequests: 1,
        transactionTimeout: this.options.transactionTimeoutMs ?? 60_000,
      });
      this.producersCreated += 1;
      this.connecting = producer
        .connect()
        .then(() => {
          this.producer = producer;
          return producer;
        })
        .finally(() => {
          this.connecting = undefined;
        });
    }
    return this.connecting;
  }

  private async discardProducer(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    if (!producer) return;
    try {
      await producer.disconnect();
    } catch {
      // Best effort: the producer is abandoned either way.
    }
  }
}

function groupOffsets(offsets: OffsetToCommit[]) {
  const byTopic = new Map<string, Array<{ partition: number; offset: string }>>();
  for (const { topic, partition, offset } of offsets) {
    byTopic.set(topic, [...(byTopic.get(topic) ?? []), { partition, offset }]);
  }
  return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
}
