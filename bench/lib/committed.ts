// The one finishing line of every throughput contestant: the group's committed offsets equal the
// input's end offsets on all partitions. Committed offsets are read as any admin tool reads them
// (OffsetFetch without require_stable), so offsets inside a still-open transaction do not count:
// a transactional contestant has finished when its last transaction has committed.
import type { Admin } from 'kafkajs';
import { benchKafka } from './records';
import { startProgress } from './progress';

/**
 * The end offset of each partition. `fetchTopicOffsets` lists offsets read_committed, so this is
 * the last stable offset — the log end for an input produced without transactions, as ours is.
 */
export async function endOffsets(admin: Admin, topic: string): Promise<Map<number, bigint>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, BigInt(o.high)]));
}

/** The group's committed offset of each partition of `topic` (-1 where it has none). */
export async function committedOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, bigint>> {
  const [response] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((response?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
}

export interface WaitForCommittedOptions {
  groupId: string;
  topic: string;
  /** The finishing line, from `endOffsets` (the input must not grow while we wait). */
  end: Map<number, bigint>;
  /** Give up after this long; default 10 min. */
  timeoutMs?: number;
  /** Poll every; default 50 ms (the granularity of the figure). */
  pollMs?: number;
  /** Progress bar label; none if omitted. */
  label?: string;
  /** Checked on each poll: an Error (the contestant's process died, say) stops the wait. */
  failure?: () => Error | undefined;
  /** Each poll's committed offsets, with the wall clock (Date.now()) when they were read. */
  onSample?: (atMs: number, committed: ReadonlyMap<number, bigint>) => void;
  brokers?: string[];
}

export interface CommittedEnd {
  /** `process.hrtime.bigint()` when the committed offsets were first seen at the end. */
  reachedAt: bigint;
  /** `process.hrtime.bigint()` when any committed offset was first seen: start-up is behind it. */
  firstCommitAt: bigint;
  /** Records covered by the committed offsets at `firstCommitAt` (the start of the steady-state window). */
  firstCommitted: number;
}

/** Polls until the group's committed offsets reach `end` on every partition. */
export async function waitForCommittedEnd(options: WaitForCommittedOptions): Promise<CommittedEnd> {
  const admin = benchKafka('bench-committed', options.brokers).admin();
  const total = [...options.end.values()].reduce((a, b) => a + b, 0n);
  const progress = options.label ? startProgress(options.label, Number(total), { plainEveryMs: 5_000 }) : undefined;
  const deadline = Date.now() + (options.timeoutMs ?? 600_000);
  const pollMs = options.pollMs ?? 50;
  let firstCommitAt: bigint | undefined;
  let firstCommitted = 0;
  try {
    await admin.connect();
    for (;;) {
      const failure = options.failure?.();
      if (failure) throw failure;
      let committed: Map<number, bigint> | undefined;
      try {
        committed = await committedOffsets(admin, options.groupId, options.topic);
      } catch (err) {
        // The group coordinator is still loading or moving: transient, keep polling.
        if (!(err as { retriable?: boolean }).retriable) throw err;
      }
      const now = process.hrtime.bigint();
      if (committed) options.onSample?.(Date.now(), committed);
      if (committed) {
        let done = 0n;
        let reached = true;
        for (const [partition, end] of options.end) {
          const c = committed.get(partition) ?? -1n;
          if (c > 0n) done += c > end ? end : c;
          // An empty partition (end 0) has nothing to commit: contestants leave it without an offset.
          if (c < end && end > 0n) reached = false;
        }
        progress?.update(Number(done));
        if (done > 0n && firstCommitAt === undefined) {
          firstCommitAt = now;
          firstCommitted = Number(done);
        }
        if (reached) return { reachedAt: now, firstCommitAt: firstCommitAt ?? now, firstCommitted: firstCommitAt === undefined ? Number(done) : firstCommitted };
      }
      if (Date.now() > deadline) {
        throw new Error(`group ${options.groupId}: committed offsets did not reach the end of ${options.topic} in ${options.timeoutMs ?? 600_000} ms`);
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  } finally {
    progress?.stop();
    await admin.disconnect().catch(() => undefined);
  }
}

/** `endOffsets` with an admin client of its own. */
export async function readEndOffsets(topic: string, brokers?: string[]): Promise<Map<number, bigint>> {
  const admin = benchKafka('bench-end-offsets', brokers).admin();
  try {
    await admin.connect();
    return await endOffsets(admin, topic);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Sum of end offsets: the record count of a topic produced from offset 0 without transactions. */
export const totalOf = (end: Map<number, bigint>): number => Number([...end.values()].reduce((a, b) => a + b, 0n));
