import type { EachBatchPayload, KafkaMessage } from 'kafkajs';
import { type GroupGeneration, type RevokedPartitions, withHeldSince } from '../../../../kafka';
import type { FlowConsumer, FlowConsumerHandlers, TopicPartitions } from '../../../../workers/runtime/flow-consumer';
import type { PartitionSignals } from '../../../../workers/runtime/partition-signals';

/**
 * An in-memory stand-in for the flow's group consumer, for unit tests of the runtime's logic only:
 * the test plays the group coordinator (join, revoke) and the fetcher (deliver), and reads what the
 * runtime did (pauses, seeks, commits). The real consumer is tested against the real broker.
 */
export class FakeFlowConsumer implements FlowConsumer {
  private handlers?: FlowConsumerHandlers;
  private generation?: GroupGeneration;
  readonly paused = new Set<string>();
  readonly seeks: Array<{ topic: string; partition: number; offset: string }> = [];
  readonly commits: Array<{ topic: string; partition: number; offset: string }> = [];
  readonly committed = new Map<string, string>();
  stopped = false;
  closed = false;

  async start(handlers: FlowConsumerHandlers): Promise<void> {
    this.handlers = handlers;
  }

  async stop(): Promise<void> {
    // Leaving the group runs the revoke point first, as kafkajs does.
    if (this.generation && this.handlers) {
      await this.handlers.onRevoke({ ...this.revocation('leave'), assignment: assignmentOf(this.generation) });
    }
    this.stopped = true;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  current(): GroupGeneration | undefined {
    return this.generation;
  }

  /** The current generation if it is past `after`; the fake's joins are the test's, so none comes while waiting. */
  async joinAfter(after: number): Promise<GroupGeneration | undefined> {
    return this.generation && this.generation.generationId > after ? this.generation : undefined;
  }

  pause(tps: TopicPartitions[]): void {
    for (const { topic, partitions } of tps) for (const p of partitions) this.paused.add(`${topic}-${p}`);
  }

  resume(tps: TopicPartitions[]): void {
    for (const { topic, partitions } of tps) for (const p of partitions) this.paused.delete(`${topic}-${p}`);
  }

  seek(at: { topic: string; partition: number; offset: string }): void {
    this.seeks.push(at);
  }

  /** The metadata of each partition's last commit (`topic-partition`). */
  readonly committedMetadata = new Map<string, string>();

  async commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string; metadata?: string }>): Promise<void> {
    for (const o of offsets) {
      this.commits.push(o);
      this.committed.set(`${o.topic}-${o.partition}`, o.offset);
      if (o.metadata === undefined) this.committedMetadata.delete(`${o.topic}-${o.partition}`);
      else this.committedMetadata.set(`${o.topic}-${o.partition}`, o.metadata);
    }
  }

  /** Each partition's log range as the test sets it (`topic-partition`). */
  readonly logRanges = new Map<string, { start: number; end: number }>();

  async logRange(topic: string, partition: number): Promise<{ start: number; end: number }> {
    const range = this.logRanges.get(`${topic}-${partition}`);
    if (!range) throw new Error(`FakeFlowConsumer: no log range set for ${topic}-${partition}`);
    return range;
  }

  /** A fetch out of range, as kafkajs reports it to the runtime (the patch's onOffsetOutOfRange). */
  async outOfRange(topic: string, partition: number, fetchOffset: string): Promise<void> {
    await this.handlers!.onOffsetOutOfRange({ topic, partition, fetchOffset });
  }

  /** While set, committed-offset reads wait for it (a recovery held part way). */
  committedReadGate?: Promise<void>;

  async committedPosition(topic: string, partition: number): Promise<{ offset: string; metadata: string | null } | undefined> {
    if (this.committedReadGate) await this.committedReadGate;
    const offset = this.committed.get(`${topic}-${partition}`);
    return offset === undefined ? undefined : { offset, metadata: this.committedMetadata.get(`${topic}-${partition}`) ?? null };
  }

  /** The coordinator's join: generation, member, assignment. */
  join(generationId: number, assignment: Record<string, number[]>, memberId = 'member-1'): GroupGeneration {
    this.generation = { groupId: 'g', generationId, memberId, assignment };
    this.handlers!.onJoin(this.generation);
    return this.generation;
  }

  /**
   * A cooperative join: the partitions kept since the previous join keep their ownership
   * generation; `revoking` are given up next (`revokeIncremental`).
   */
  joinCooperative(generationId: number, assignment: Record<string, number[]>, revoking: Record<string, number[]> = {}, memberId = 'member-1'): GroupGeneration {
    this.generation = withHeldSince({ groupId: 'g', generationId, memberId, assignment, cooperative: true, revoking }, this.generation);
    this.handlers!.onJoin(this.generation);
    return this.generation;
  }

  /** The revoke point after a cooperative join, for its `revoking` partitions, under its generation. */
  async revokeIncremental(): Promise<void> {
    const g = this.generation!;
    await this.handlers!.onRevoke({ ...this.revocation('rebalance'), incremental: true, assignment: Object.entries(g.revoking ?? {}).map(([topic, partitions]) => ({ topic, partitions })) });
  }

  /** The revoke point before a rebalance, for the current generation's partitions. */
  async revoke(): Promise<void> {
    await this.handlers!.onRevoke({ ...this.revocation('rebalance'), assignment: assignmentOf(this.generation!) });
  }

  /** One fetched batch; returns what the runtime resolved and whether it paused the partition. */
  /** Hands the runtime a batch exactly as given (e.g. a value that does not decode). */
  deliverPayload(payload: EachBatchPayload): Promise<void> {
    return this.handlers!.eachBatch(payload);
  }

  async deliver(topic: string, partition: number, records: Array<{ offset: number; key: string; value: unknown }>, highWatermark?: string) {
    let resolved: string | undefined;
    let pausedByBatch = false;
    let heartbeats = 0;
    const messages = records.map(
      (r) => ({ offset: String(r.offset), key: Buffer.from(r.key), value: Buffer.from(JSON.stringify(r.value)), timestamp: String(Date.now()), attributes: 0, headers: {} }) as KafkaMessage,
    );
    const last = records[records.length - 1];
    await this.handlers!.eachBatch({
      batch: { topic, partition, highWatermark: highWatermark ?? String((last?.offset ?? -1) + 1), messages },
      resolveOffset: (o: string) => {
        resolved = o;
      },
      pause: () => {
        pausedByBatch = true;
        return () => undefined;
      },
      heartbeat: async () => {
        heartbeats++;
      },
    } as unknown as EachBatchPayload);
    return { resolved, pausedByBatch, heartbeats };
  }

  private revocation(reason: RevokedPartitions['reason']): Omit<RevokedPartitions, 'assignment'> {
    const g = this.generation!;
    return { groupId: g.groupId, generationId: g.generationId, memberId: g.memberId, reason };
  }
}

const assignmentOf = (g: GroupGeneration) => Object.entries(g.assignment).map(([topic, partitions]) => ({ topic, partitions }));

/** Records the signals the runtime sends to the partition workflows (unit tests only). */
export class RecordingSignals implements PartitionSignals {
  readonly assignedCalls: Array<Parameters<PartitionSignals['assigned']>> = [];
  readonly revokedCalls: Array<Parameters<PartitionSignals['revoked']>> = [];
  readonly restoringCalls: Array<Parameters<NonNullable<PartitionSignals['restoring']>>> = [];

  async assigned(...args: Parameters<PartitionSignals['assigned']>): Promise<void> {
    this.assignedCalls.push(args);
  }

  async revoked(...args: Parameters<PartitionSignals['revoked']>): Promise<void> {
    this.revokedCalls.push(args);
  }

  async restoring(...args: Parameters<NonNullable<PartitionSignals['restoring']>>): Promise<void> {
    this.restoringCalls.push(args);
  }

  /** The partitions the watchdog looked at for a stuck workflow run, in order. */
  readonly unstickCalls: number[] = [];

  async unstick(ref: Parameters<NonNullable<PartitionSignals['unstick']>>[0]): Promise<boolean> {
    this.unstickCalls.push(ref.partition);
    return false;
  }
}
