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
 * answer — none in time, or a failure of EndTxn other than a fence (commitFailureOutcome) — tears
 * the producer down and is reported as SnapshotCommitTimeoutError: outcome unknown; the next
 * producer's initialization settles the transaction.
 */
import type { Producer, RecordMetadata, Transaction } from 'kafkajs';
import { assertFencedTxnOffsetCommit } from './broker-versions';
import type { KafkaClient } from './client';
import { commitFailureOutcome, fenceReason, protocolErrorType, type SentRecords, SnapshotCommitTimeoutError, SnapshotWriteFencedError } from './errors';
import { type CheckScope, HangingTransactions, type RepairResult, type TransactionState } from './hanging-transactions';
import { byTopic, chunkByBytes, countByPartition, DEFAULT_MAX_REQUEST_BYTES, recordBytes } from './request-size';
import { ClosedError, InternalError } from '../config/errors';

export interface SnapshotMessage {
  topic: string;
  partition: number;
  key: string | Buffer;
  /** null is a tombstone (the key's state was deleted). */
  value: string | Buffer | null;
  headers?: Record<string, string | Buffer>;
  /**
   * A record encoded already (core/emitted-outputs.ts): its key, value and headers are
   * `encoded[encodedStart, encodedEnd)` in Kafka's v2 record format (what follows the offset
   * delta); `key` and `value` are then ignored (kafkajs wants a value: null). The produce writer
   * (kafka/protocol/produce-writer.ts) copies the bytes into the record batch.
   */
  encoded?: Buffer;
  encodedStart?: number;
  encodedEnd?: number;
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
  /** The input topic whose offsets are committed (named in fence errors). */
  inputTopic?: string;
  /**
   * Records are sent in produce requests of at most about this many bytes (one record batch per
   * partition each, which the broker's max.message.bytes bounds, 1 MiB by default); default 1,000,000.
   */
  maxRequestBytes?: number;
  /**
   * The transaction protocol: 2 (KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 add their
   * partitions to the transaction, EndTxn v5 bumps the producer epoch every transaction), 1 (the
   * classic one: AddPartitionsToTxn and AddOffsetsToTxn first), or 'auto' (the default): 2 where
   * the cluster finalizes `transaction.version` 2 (Kafka 4.0+ by default), else 1.
   */
  transactionVersion?: TransactionVersion;
  /**
   * Where this producer's transactions write (beside the group's offsets partition, always
   * checked): after each fence, transactions of its producer id left open there by an earlier
   * epoch — hanging: their coordinator ended them without a marker there — are ended there as
   * their coordinator decided (kafka/hanging-transactions.ts). Absent: only the group's offsets partition is checked.
   */
  hangingScope?: () => readonly CheckScope[];
  /** The check's connections, shared by a process's writers (their owner closes it); absent: the writer makes its own. */
  hanging?: HangingTransactions;
  /** Told what each fence's check found and did, or why it could not be made (it never fails the fence). */
  onHangingCheck?: (outcome: { result: RepairResult } | { error: unknown }) => void;
}

/** KAFKA_TRANSACTION_VERSION: which transaction protocol the partition producers speak. */
export type TransactionVersion = 'auto' | 1 | 2;

/** What a committed transaction wrote: the first offset of its records on each partition. */
export interface CommitResult {
  sent: SentRecords[];
}

export interface CommitRequest {
  messages: SnapshotMessage[];
  offsets: OffsetToCommit[];
  generation: WriteGeneration;
}

/**
 * Retries of the partition producer. Back-to-back transactions meet CONCURRENT_TRANSACTIONS on the
 * next transaction's first coordinator request while the broker still writes the previous one's
 * markers (a few ms); kafkajs's default first retry after ~300 ms made a transaction cost ~70 ms
 * here. Steps from 1 ms growing by 1.2 (the Java client retries it after `retry.backoff.ms`):
 * ≈ 25 % less per small transaction than steps from 2 ms by 1.5, on a par with the Java client at
 * a 1 ms backoff (docs/benchmarks.md, experiment A). 40 retries: still ≈ 7 s in all before giving
 * up on a real outage, as before.
 */
const TRANSACTION_RETRY = { initialRetryTime: 1, multiplier: 1.2, maxRetryTime: 1_000, retries: 40 };

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
  private ownHanging: HangingTransactions | undefined;
  /** Producers created so far (1 + rebuilds after fences, timeouts and failures). */
  producersCreated = 0;

  constructor(options: TransactionalWriterOptions) {
    this.options = options;
    this.transactionalId = snapshotTransactionalId(options.transactionalIdPrefix, options.partition);
  }

  /**
   * Writes `messages` and commits `offsets` for the group in one transaction, under `generation`.
   * Commits of one writer run one at a time, in call order.
   * @throws SnapshotWriteFencedError when a newer owner exists (nothing became visible)
   * @throws SnapshotCommitTimeoutError when the commit went unanswered or failed short of a fence
   *   (outcome unknown; producer torn down)
   */
  commit(request: CommitRequest): Promise<CommitResult> {
    return this.enqueue(() => this.commitNow(request));
  }

  /**
   * Fences now: initializes a producer with the partition's transactional.id (InitProducerId),
   * which bumps the epoch, so every earlier producer with the id is fenced, and aborts (waiting
   * it out) whatever transaction an earlier owner left open. A new owner calls it before it reads.
   * Transactions an earlier epoch left hanging are ended right after, before any commit of this
   * producer, but not awaited here: the new owner's reads go on meanwhile (one such transaction
   * holds them at its first offset until it is ended).
   * @throws SnapshotWriteFencedError if a still newer producer fenced us meanwhile
   */
  init(): Promise<void> {
    let initialized: { producer: Producer; before: TransactionState | undefined } | undefined;
    const fenced = this.enqueue(async () => {
      if (this.closed) throw new ClosedError(`TransactionalWriter ${this.transactionalId}`);
      await this.discardProducer(); // a producer initialized earlier would not bump the epoch again
      // The outcome of the transaction the initialization completes or aborts, for a hanging one:
      // read before InitProducerId, beside the producer's connection.
      const state = this.hangingCheck()
        .transactionState(this.transactionalId)
        .catch(() => undefined);
      const producer = await this.currentProducer();
      const before = await state;
      try {
        // kafkajs initializes the transactional id lazily, at the first transaction; one that
        // registered nothing ends without an EndTxn.
        const transaction = await producer.transaction();
        await transaction.abort();
      } catch (err) {
        await this.discardProducer();
        throw this.fenced(err, undefined) ?? err;
      }
      initialized = { producer, before };
    });
    this.enqueue(async () => {
      if (initialized) await this.endHangingTransactions(initialized.producer, initialized.before);
    });
    return fenced;
  }

  /**
   * Once initialized, every earlier transaction of the producer id is over at its coordinator: one
   * still open on a partition is hanging and is ended there (committed or aborted as its
   * coordinator decided), before this producer's first
   * transaction (which would otherwise pile its offsets on the hanging ones).
   */
  private async endHangingTransactions(producer: Producer, before: TransactionState | undefined): Promise<void> {
    const identity = producer.producerIdentity();
    if (!identity) return;
    try {
      const result = await this.hangingCheck().repair(identity, this.options.hangingScope?.() ?? [], this.options.groupId, before);
      this.options.onHangingCheck?.({ result });
    } catch (error) {
      this.options.onHangingCheck?.({ error });
    }
  }

  private hangingCheck(): HangingTransactions {
    if (this.options.hanging) return this.options.hanging;
    if (!this.ownHanging) this.ownHanging = new HangingTransactions(this.options.client);
    return this.ownHanging;
  }

  /** The transaction protocol the current producer speaks (2: KIP-890 part 2), once initialized; undefined before or without a producer. */
  transactionVersion(): 1 | 2 | undefined {
    return this.producer?.transactionVersion();
  }

  private enqueue<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private fenced(err: unknown, request: CommitRequest | undefined): SnapshotWriteFencedError | undefined {
    const reason = fenceReason(err);
    if (!reason) return undefined;
    const topic = request?.offsets[0]?.topic ?? this.options.inputTopic ?? '';
    const detail = `${protocolErrorType(err) ?? 'fenced'} for transactional.id ${this.transactionalId}`;
    return new SnapshotWriteFencedError(topic, this.options.partition, detail, {
      reason,
      transactionalId: this.transactionalId,
      cause: err,
    });
  }

  /** Disconnects the producer. An open transaction is left to the next owner's fence (or timeout). */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    await this.discardProducer();
    await this.ownHanging?.close();
  }

  private async commitNow(request: CommitRequest): Promise<CommitResult> {
    const { messages, offsets, generation } = request;
    if (this.closed) throw new ClosedError(`TransactionalWriter ${this.transactionalId}`);
    const producer = await this.currentProducer();
    let transaction: Transaction | undefined;
    const sent = new Map<string, SentRecords>();
    try {
      transaction = await producer.transaction();
      const tx = transaction;
      if (typeof tx.addPartitions !== 'function') {
        throw new InternalError('kafkajs transaction without addPartitions: is the kafkajs patch applied? (npm install runs patch-package)');
      }
      // Round trips, not bytes, are what a small transaction costs. The partitions and the group's
      // offsets are registered with the transaction coordinator first, both requests at once
      // (pipelined on one connection, answered in order: no CONCURRENT_TRANSACTIONS between
      // them); then the records and the offsets go out at once (Produce to the partitions'
      // leaders, TxnOffsetCommit to the group coordinator); EndTxn follows. Registering both
      // before either is used matters: a Produce the broker verifies while the AddOffsetsToTxn of
      // the same transaction is still pending is held back (≈ 20 ms, measured). On transaction
      // version 2 the registrations send nothing (Produce v12 and TxnOffsetCommit v5 register
      // themselves), and the offsets go first: their CONCURRENT_TRANSACTIONS while the previous
      // transaction completes is retried within a millisecond, where the leader's add for a
      // Produce that met it backs off ≈ 20 ms (docs/kafkajs-patch.md section 15).
      const partitions = new Map<string, Set<number>>();
      let lastTopic: string | undefined;
      let lastPartition = -1;
      for (const m of messages) {
        if (m.topic === lastTopic && m.partition === lastPartition) continue; // a run (a key's outputs, the snapshots)
        lastTopic = m.topic;
        lastPartition = m.partition;
        const set = partitions.get(m.topic);
        if (set) set.add(m.partition);
        else partitions.set(m.topic, new Set([m.partition]));
      }
      await settleAll([
        partitions.size > 0
          ? tx.addPartitions({ topics: [...partitions].map(([topic, ps]) => ({ topic, partitions: [...ps].map((partition) => ({ partition })) })) })
          : Promise.resolve(),
        offsets.length > 0 ? tx.addOffsets({ consumerGroupId: this.options.groupId }) : Promise.resolve(),
      ]);
      const offsetsSent =
        offsets.length > 0
          ? tx.sendOffsets({
              consumerGroupId: this.options.groupId,
              topics: groupOffsets(offsets),
              generationId: generation.generationId,
              memberId: generation.memberId,
            })
          : Promise.resolve();
      const records = (async () => {
        for (const chunk of requestChunks(messages, this.options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES)) {
          // The messages as they are (kafkajs reads partition, key, value and headers, ignores
          // `topic` and changes nothing): no copy per record.
          const metadata = await tx.sendBatch({ topicMessages: topicRuns(chunk) });
          recordSent(sent, chunk, metadata);
        }
      })();
      await settleAll([records, offsetsSent]);
    } catch (err) {
      await this.abortAndDiscard(transaction);
      throw this.fenced(err, request) ?? err;
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
        throw new SnapshotCommitTimeoutError(this.transactionalId, timeoutMs, { sent: [...sent.values()] });
      }
    } catch (err) {
      if (err instanceof SnapshotCommitTimeoutError) throw err;
      // A failed EndTxn leaves kafkajs's transaction state machine in COMMITTING: unusable.
      await this.discardProducer();
      if (commitFailureOutcome(err) === 'refused') throw this.fenced(err, request) ?? err;
      // The request may have reached the coordinator, which may have committed: not a failure to
      // retry but an outcome to learn, before anything the transaction carried is written again.
      throw new SnapshotCommitTimeoutError(this.transactionalId, undefined, { cause: err, sent: [...sent.values()] });
    } finally {
      clearTimeout(timer);
    }
    return { sent: [...sent.values()] };
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
    // Without TxnOffsetCommit v3 (Kafka < 2.5) a stale owner's commits would not be fenced: refuse.
    // A required transaction version 2 is checked there too, for a named error rather than kafkajs's.
    await assertFencedTxnOffsetCommit(this.options.client, this.options.groupId, { transactionVersion2: this.options.transactionVersion === 2 });
    if (this.producer) return this.producer;
    if (!this.connecting) {
      const producer = this.options.client.kafka.producer({
        transactionalId: this.transactionalId,
        idempotent: true,
        // Produce requests stay one at a time per broker (kafkajs's idempotent producer locks them);
        // the transaction's coordinator requests may be pipelined beside them (see commitNow).
        maxInFlightRequests: 5,
        transactionTimeout: this.options.transactionTimeoutMs ?? 60_000,
        retry: TRANSACTION_RETRY,
        transactionVersion: this.options.transactionVersion === 'auto' ? undefined : this.options.transactionVersion,
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

/**
 * The messages in requests of at most `maxBytes` (chunkByBytes); most transactions fit in one, and
 * are then sent as they are, without an array built a message at a time.
 */
function requestChunks(messages: SnapshotMessage[], maxBytes: number): SnapshotMessage[][] {
  let size = 0;
  for (let i = 0; i < messages.length; i++) {
    size += recordBytes(messages[i]!);
    if (size > maxBytes) return chunkByBytes(messages, maxBytes);
  }
  return messages.length > 0 ? [messages] : [];
}

/**
 * The messages by topic (byTopic), taking each topic's messages as one slice when they come as one
 * run — a transaction's snapshots, then its outputs — rather than a push per message.
 */
function topicRuns(messages: SnapshotMessage[]): Array<{ topic: string; messages: SnapshotMessage[] }> {
  const runs: Array<{ topic: string; messages: SnapshotMessage[] }> = [];
  let from = 0;
  for (let i = 1; i <= messages.length; i++) {
    if (i < messages.length && messages[i]!.topic === messages[from]!.topic) continue;
    const topic = messages[from]!.topic;
    for (const r of runs) if (r.topic === topic) return byTopic(messages); // a topic in two runs: grouped in order
    runs.push({ topic, messages: from === 0 && i === messages.length ? messages : messages.slice(from, i) });
    from = i;
  }
  return runs;
}

/** Keeps, per partition, the offset of the first record sent and how many were sent. */
function recordSent(sent: Map<string, SentRecords>, chunk: readonly SnapshotMessage[], metadata: RecordMetadata[]): void {
  const counts = countByPartition(chunk);
  for (const m of metadata) {
    const key = `${m.topicName}\u0000${m.partition}`;
    const count = counts.get(m.topicName)?.[m.partition] ?? 0;
    const known = sent.get(key);
    if (known) known.count += count;
    else if (m.baseOffset !== undefined) sent.set(key, { topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset, count });
  }
}

function groupOffsets(offsets: OffsetToCommit[]) {
  const topics = new Map<string, Array<{ partition: number; offset: string }>>();
  for (const { topic, partition, offset } of offsets) {
    topics.set(topic, [...(topics.get(topic) ?? []), { partition, offset }]);
  }
  return [...topics].map(([topic, partitions]) => ({ topic, partitions }));
}

/**
 * Waits for every request (kafkajs's transaction state must not see an abort while a request of
 * it is still in flight), then throws the first failure — a fence before any other, since a fence
 * is what stops the partition.
 */
async function settleAll(requests: Promise<unknown>[]): Promise<void> {
  const outcomes = await Promise.allSettled(requests);
  const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
  if (failures.length > 0) throw failures.find((e) => fenceReason(e) !== undefined) ?? failures[0];
}
