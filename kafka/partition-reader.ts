/**
 * A group-less, read_committed reader of one partition, from an offset up to a bound. It never
 * joins a group or commits offsets. The bound defaults to the log end read read_uncommitted when
 * the read starts, so transactions open at that moment are waited out (read_committed stops at
 * the last stable offset until they end). The bound is often a commit marker that no record
 * carries, so progress is measured by the fetched batches' last offsets, not by records.
 *
 * Aborted records are dropped by kafkajs's (patched) filter; see docs/kafkajs-patch.md.
 */
import type { KafkaClient } from './client';
import { PartitionReadStalledError, protocolErrorType } from './errors';
import { decodeFetchResponse } from './fetch-decoder';
import { describeProducers, type OpenTransaction } from './hanging-transactions';
import {
  createCluster,
  createErrorFromCode,
  type FetchPartitionData,
  type InternalCluster,
  ISOLATION,
  type RawMessage,
  ResettingCluster,
  withoutAborted,
} from './internals';
import { InternalError } from '../config/errors';

export interface ReadRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  timestamp: string;
  headers: Record<string, Buffer | Buffer[] | undefined>;
}

export interface StallInfo {
  topic: string;
  partition: number;
  position: string;
  bound: string;
  stalledForMs: number;
}

export interface ReadOptions {
  topic: string;
  partition: number;
  /** First offset to read (inclusive). */
  fromOffset: string;
  /** Exclusive bound; default: the log end, read read_uncommitted when the read starts. */
  toOffset?: string;
  /** Max bytes per fetch; default 4 MiB. */
  maxBytes?: number;
  /** No-progress deadline; default 180 s. */
  stallTimeoutMs?: number;
  /** The error to raise when the deadline passes; default PartitionReadStalledError. */
  onStall?: (info: StallInfo) => Error | Promise<Error>;
  /**
   * Called while the read makes no progress: once it has lasted `noticeEveryMs`, then every
   * `noticeEveryMs` (a short pause is routine: a fetch parked at an open transaction for a moment).
   */
  onNoProgress?: (info: StallInfo) => void;
  /** Default 5 s. */
  noticeEveryMs?: number;
  /** Called with each fetch's committed records below the bound, in offset order. */
  onRecords: (records: ReadRecord[]) => void | Promise<void>;
}

export interface ReadResult {
  /** The bound the read stopped at. */
  bound: string;
  records: number;
  fetches: number;
}

const RETRIABLE_FETCH_ERRORS = new Set([
  'NOT_LEADER_FOR_PARTITION',
  'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'UNKNOWN_LEADER_EPOCH',
  'FENCED_LEADER_EPOCH',
  'REPLICA_NOT_AVAILABLE',
  'OFFSET_NOT_AVAILABLE',
]);

export class PartitionReader {
  /** Its connections, new ones after a request timed out (ResettingCluster). */
  private readonly clusters: ResettingCluster;

  constructor(client: KafkaClient) {
    this.clusters = new ResettingCluster(() => createCluster(client, ISOLATION.READ_COMMITTED));
  }

  /** The log end offset (high watermark, read_uncommitted): includes open transactions. */
  async logEndOffset(topic: string, partition: number): Promise<string> {
    return this.listOffset(topic, partition, ISOLATION.READ_UNCOMMITTED);
  }

  /** The last stable offset (read_committed): stops before the first open transaction. */
  async lastStableOffset(topic: string, partition: number): Promise<string> {
    return this.listOffset(topic, partition, ISOLATION.READ_COMMITTED);
  }

  /**
   * The transactions open on the partition as its leader sees them (DescribeProducers): each
   * producer's id, epoch and the offset its open transaction starts at.
   */
  async openTransactions(topic: string, partition: number): Promise<OpenTransaction[]> {
    const described = await this.clusters.run(async (cluster) => {
      await cluster.addTargetTopic(topic);
      return describeProducers(cluster, [{ topic, partitions: [partition] }]);
    });
    return described.flatMap((d) =>
      d.activeProducers.filter((p) => p.currentTxnStartOffset !== '-1').map((p) => ({ producerId: p.producerId, producerEpoch: p.producerEpoch, startOffset: p.currentTxnStartOffset })),
    );
  }

  /** The log start offset (the earliest offset still in the log). */
  async logStartOffset(topic: string, partition: number): Promise<string> {
    return this.listOffset(topic, partition, ISOLATION.READ_UNCOMMITTED, -2);
  }

  async read(options: ReadOptions): Promise<ReadResult> {
    const { topic, partition } = options;
    const bound = BigInt(options.toOffset ?? (await this.logEndOffset(topic, partition)));
    const stallTimeoutMs = options.stallTimeoutMs ?? 180_000;
    const noticeEveryMs = options.noticeEveryMs ?? 5_000;
    let position = BigInt(options.fromOffset);
    let lastProgress = Date.now();
    let lastNotice = lastProgress;
    let records = 0;
    let fetches = 0;

    while (position < bound) {
      const now = Date.now();
      const stalledForMs = now - lastProgress;
      const info = () => ({ topic, partition, position: String(position), bound: String(bound), stalledForMs });
      if (stalledForMs > stallTimeoutMs) {
        throw options.onStall
          ? await options.onStall(info())
          : new PartitionReadStalledError(topic, partition, String(position), String(bound), stalledForMs);
      }
      if (options.onNoProgress && now - lastNotice >= noticeEveryMs) {
        lastNotice = now;
        options.onNoProgress(info());
      }

      const data = await this.fetchOnce(topic, partition, String(position), options.maxBytes ?? 4 * 1024 * 1024);
      fetches += 1;
      if (data === undefined) continue; // leadership moved; metadata refreshed

      const { within, records: committed } = fetchedRecords(data.messages, String(position), data.abortedTransactions);
      const next = nextOffset(within, position);
      const visible = belowBound(committed, bound);
      if (visible.length > 0) {
        records += visible.length;
        await options.onRecords(visible);
      }
      if (next > position) {
        position = next;
        lastProgress = Date.now();
        lastNotice = lastProgress;
      }
    }
    return { bound: String(bound), records, fetches };
  }

  /** Every committed record of `topic`, each partition from offset 0 to its end (read_committed), with its partition. */
  async readTopic(topic: string, partitions: number, onRecord: (record: ReadRecord, partition: number) => void): Promise<void> {
    for (let p = 0; p < partitions; p++) {
      await this.read({
        topic,
        partition: p,
        fromOffset: '0',
        onRecords: (records) => {
          for (const r of records) onRecord(r, p);
        },
      });
    }
  }

  async close(): Promise<void> {
    await this.clusters.close();
  }

  private async leader(cluster: InternalCluster, topic: string, partition: number) {
    await cluster.addTargetTopic(topic);
    const leaders = cluster.findLeaderForPartitions(topic, [partition]);
    const nodeId = Object.keys(leaders)[0];
    if (nodeId === undefined) {
      await cluster.refreshMetadata().catch(() => undefined);
      // Typed like the broker's answer, so a read waits for a leader instead of failing.
      throw Object.assign(new Error(`no leader known for ${topic}/${partition}`), { type: 'LEADER_NOT_AVAILABLE' });
    }
    return cluster.findBroker({ nodeId });
  }

  private async listOffset(topic: string, partition: number, isolationLevel: number, timestamp = -1): Promise<string> {
    const { responses } = await this.clusters.run(async (cluster) =>
      (await this.leader(cluster, topic, partition)).listOffsets({
        isolationLevel,
        topics: [{ topic, partitions: [{ partition, timestamp }] }], // -1: latest, -2: earliest
      }),
    );
    const offset = responses.find((r) => r.topic === topic)?.partitions.find((p) => p.partition === partition)?.offset;
    if (offset === undefined) throw new InternalError(`no offset for ${topic}/${partition} in ListOffsets response`);
    return offset;
  }

  /** One read_committed fetch; undefined after a leadership change (metadata refreshed). */
  private async fetchOnce(topic: string, partition: number, fetchOffset: string, maxBytes: number) {
    try {
      const { responses } = await this.clusters.run(async (cluster) =>
        (await this.leader(cluster, topic, partition)).fetch({
          // Record batches decoded by us, not by kafkajs (its Long per record is most of a read's CPU).
          decodeResponse: decodeFetchResponse,
          isolationLevel: ISOLATION.READ_COMMITTED,
          maxWaitTime: 500,
          minBytes: 1,
          maxBytes,
          topics: [{ topic, partitions: [{ partition, fetchOffset, maxBytes }] }],
        }),
      );
      const data = responses.find((r) => r.topicName === topic)?.partitions.find((p) => p.partition === partition);
      if (!data) throw new InternalError(`no data for ${topic}/${partition} in Fetch response`);
      if (data.errorCode !== 0) throw createErrorFromCode(data.errorCode);
      return data;
    } catch (err) {
      const type = protocolErrorType(err);
      if (type && RETRIABLE_FETCH_ERRORS.has(type)) {
        await this.clusters.run((cluster) => cluster.refreshMetadata()).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
        return undefined;
      }
      if (type === 'OFFSET_OUT_OF_RANGE') {
        // The log no longer holds the position (it was truncated or its start moved past it): no
        // progress is possible here; the caller's no-progress deadline decides, and diagnoses.
        await new Promise((r) => setTimeout(r, 200));
        return undefined;
      }
      throw err;
    }
  }
}

/**
 * The offset after the last record batch seen (its header's last offset, so compaction gaps and
 * markers count). The records of one batch share its context object: each batch is looked at once.
 */
function nextOffset(messages: RawMessage[], position: bigint): bigint {
  let next = position;
  let seen: RawMessage['batchContext'] | undefined;
  for (const m of messages) {
    const context = m.batchContext;
    const { firstOffset, lastOffsetDelta } = context;
    const whole = firstOffset !== undefined && lastOffsetDelta !== undefined;
    if (whole && context === seen) continue;
    seen = context;
    const end = whole ? BigInt(firstOffset) + BigInt(lastOffsetDelta) + 1n : BigInt(m.offset) + 1n;
    if (end > next) next = end;
  }
  return next;
}

/**
 * What kafkajs's Batch makes of a fetch, without its Long parse of every record's offset: `within`,
 * the records at or after the fetched offset (control records included: they move the position),
 * and `records`, those of them that are data of committed transactions (aborted ones dropped by
 * kafkajs's patched filter, control records left out).
 */
export function fetchedRecords(
  messages: RawMessage[],
  fetchedOffset: string,
  abortedTransactions: FetchPartitionData['abortedTransactions'] | undefined,
): { within: RawMessage[]; records: RawMessage[] } {
  const within = fromOffset(messages, fetchedOffset);
  return { within, records: committedData(withoutAborted(within, abortedTransactions)) };
}

/** Whether offset `a` is below offset `b`: both decimal strings without leading zeros (as kafkajs writes them). */
function offsetBelow(a: string, b: string): boolean {
  return a.length !== b.length ? a.length < b.length : a < b;
}

/**
 * The fetched records at or after the fetched offset: the broker answers from the start of the
 * record batch that holds it, so a first batch can begin below it. The same array when none is
 * (kafkajs's Batch parses every record's offset into a Long for this).
 */
function fromOffset(messages: RawMessage[], fetchedOffset: string): RawMessage[] {
  let below = 0;
  for (const m of messages) if (offsetBelow(m.offset, fetchedOffset)) below++;
  return below === 0 ? messages : messages.filter((m) => !offsetBelow(m.offset, fetchedOffset));
}

/** The data records (control records — transaction markers — left out). */
function committedData(messages: RawMessage[]): RawMessage[] {
  const data: RawMessage[] = [];
  for (const m of messages) if (!m.isControlRecord) data.push(m);
  return data;
}

/**
 * The fetched records below the bound (kafkajs's messages are ReadRecords with more fields). Only
 * a fetch's last records can reach the bound: the rest are handed over as they are, uncopied.
 */
function belowBound(messages: RawMessage[], bound: bigint): ReadRecord[] {
  let n = messages.length;
  while (n > 0 && BigInt(messages[n - 1]!.offset) >= bound) n--;
  return n === messages.length ? messages : messages.slice(0, n);
}
