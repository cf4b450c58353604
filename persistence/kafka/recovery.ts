/**
 * The recovery read of one snapshot partition: group-less, read_committed, from the log start up
 * to a bound captured BEFORE reading — the log end read read_uncommitted, so a transaction open at
 * that moment is waited out instead of silently under-read (a bound at the last stable offset
 * would miss snapshots committed above an open transaction). A read that makes no progress for
 * the stall deadline fails with a RecoveryReadStalledError naming the diagnosed cause; while it
 * makes none it says so in the log every few seconds. A slow read that progresses never fails.
 */
import type { Logger } from '../../core/logger';
import type { ReadOptions, ReadResult, StallInfo } from '../../kafka/partition-reader';
import type { OpenTransaction } from '../../kafka/hanging-transactions';
import { diagnoseStall } from './diagnose';
import { RecoveryReadStalledError, type StallObservation } from './errors';

/** What the read needs from the Kafka port (PartitionReader has it). */
export interface SnapshotLogReader {
  logEndOffset(topic: string, partition: number): Promise<string>;
  lastStableOffset(topic: string, partition: number): Promise<string>;
  logStartOffset(topic: string, partition: number): Promise<string>;
  /** The transactions open on the partition (DescribeProducers), for a stall's diagnosis; optional. */
  openTransactions?(topic: string, partition: number): Promise<OpenTransaction[]>;
  read(options: ReadOptions): Promise<ReadResult>;
}

/** A key's latest record: its value bytes and where it was read. */
export interface StoredSnapshot {
  readonly bytes: Buffer;
  readonly offset: string;
}

export interface RecoveryReadOptions {
  readonly reader: SnapshotLogReader;
  readonly topic: string;
  readonly partition: number;
  readonly stallTimeoutMs: number;
  /** How often a read without progress is logged; default 5 s. */
  readonly noticeEveryMs?: number;
  /** Start here instead of the log start (a checkpoint). */
  readonly fromOffset?: string;
  /**
   * Read up to the last stable offset instead of the log end: every transaction below it is
   * decided, so nothing is waited for (a standby copy's rounds). Default: the log end, waiting out
   * the transactions open when the read starts (a restore, after its fence).
   */
  readonly upToLastStable?: boolean;
  readonly logger?: Logger;
  /** After each fetch's records: the records read so far and the share of the range read (0–1). */
  readonly onProgress?: (records: number, fraction: number) => void;
}

/** The share of [from, bound) read once the record at `last` has been: 0–1 (an empty range is read). */
export function rangeRead(from: string, bound: string, last: string): number {
  const span = BigInt(bound) - BigInt(from);
  if (span <= 0n) return 1;
  const done = BigInt(last) + 1n - BigInt(from);
  return Math.min(1, Math.max(0, Number(done) / Number(span)));
}

export interface RecoveryReadResult {
  /** Each key's latest record (tombstoned keys removed). */
  readonly snapshots: Map<string, StoredSnapshot>;
  /** Keys whose last record in the range is a tombstone (what a delta read deletes from a local copy). */
  readonly deleted: Set<string>;
  readonly fromOffset: string;
  /** The log end (read_uncommitted) captured before the read: what it read up to. */
  readonly bound: string;
  /** The last stable offset when the read started; below the bound means it waited for transactions. */
  readonly lastStableAtStart: string;
  readonly records: number;
  readonly tombstones: number;
  readonly bytes: number;
  readonly fetches: number;
  readonly ms: number;
}

export async function readSnapshotPartition(o: RecoveryReadOptions): Promise<RecoveryReadResult> {
  const { reader, topic, partition, logger } = o;
  const started = performance.now();
  // The bound first: the last stable offset read after it can only be at or above where it was then.
  const bound = o.upToLastStable ? await reader.lastStableOffset(topic, partition) : await reader.logEndOffset(topic, partition);
  const [lastStableAtStart, fromOffset] = await Promise.all([
    reader.lastStableOffset(topic, partition),
    o.fromOffset ?? reader.logStartOffset(topic, partition),
  ]);
  if (BigInt(lastStableAtStart) < BigInt(bound)) {
    logger?.warn(
      { topic, partition, lastStable: lastStableAtStart, bound },
      'snapshot recovery waits for open transaction(s): the last stable offset is below the bound; this normally ' +
        "resolves within the pinning producer's transaction.timeout.ms plus the broker's abort scan",
    );
  }
  const snapshots = new Map<string, StoredSnapshot>();
  const deleted = new Set<string>();
  let records = 0;
  let tombstones = 0;
  let bytes = 0;
  const result = await reader.read({
    topic,
    partition,
    fromOffset,
    toOffset: bound,
    stallTimeoutMs: o.stallTimeoutMs,
    noticeEveryMs: o.noticeEveryMs,
    onNoProgress: (info) =>
      logger?.info(
        { topic, partition, position: info.position, bound: info.bound, stalledForMs: info.stalledForMs },
        `snapshot recovery read making no progress at offset ${info.position} (bound ${info.bound}) for ${Math.round(info.stalledForMs / 1000)} s`,
      ),
    onStall: (info) => stalled(reader, info),
    onRecords: (batch) => {
      for (const r of batch) {
        if (r.key === null) continue; // not ours: snapshots always have a key
        records++;
        const key = r.key.toString('utf8');
        if (r.value === null) {
          tombstones++;
          snapshots.delete(key);
          deleted.add(key);
        } else {
          if (deleted.size > 0) deleted.delete(key);
          bytes += r.value.length;
          // A copy: the decoded value shares the whole fetch response's memory otherwise.
          snapshots.set(key, { bytes: Buffer.from(r.value), offset: r.offset });
        }
      }
      if (o.onProgress && batch.length > 0) o.onProgress(records, rangeRead(fromOffset, bound, batch[batch.length - 1]!.offset));
    },
  });
  const ms = performance.now() - started;
  logger?.info(
    { topic, partition, fromOffset, bound, keys: snapshots.size, records, tombstones, ms: Math.round(ms) },
    'snapshot partition read',
  );
  return { snapshots, deleted, fromOffset, bound: result.bound, lastStableAtStart, records, tombstones, bytes, fetches: result.fetches, ms };
}

/** The deadline passed: re-read the offsets (best effort; a failure is itself an observation). */
export async function stalled(reader: SnapshotLogReader, info: StallInfo): Promise<RecoveryReadStalledError> {
  let observation: StallObservation = { ...info };
  try {
    const logEnd = await reader.logEndOffset(info.topic, info.partition);
    observation = { ...observation, logEnd };
    observation = { ...observation, lastStable: await reader.lastStableOffset(info.topic, info.partition) };
  } catch (err) {
    if (observation.logEnd === undefined) observation = { ...observation, reReadError: err };
  }
  // Pinned by an open transaction: whose (best effort; DescribeProducers may be refused).
  if (reader.openTransactions && observation.lastStable !== undefined && BigInt(observation.lastStable) <= BigInt(info.position)) {
    try {
      observation = { ...observation, openTransactions: await reader.openTransactions(info.topic, info.partition) };
    } catch {
      // the diagnosis goes without it
    }
  }
  const { cause, explanation } = diagnoseStall(observation);
  return new RecoveryReadStalledError(observation, cause, explanation);
}
