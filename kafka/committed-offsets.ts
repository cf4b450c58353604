/**
 * Committed group offsets read with OffsetFetch v7 `require_stable`: while a transaction that
 * moves one of them is pending, the coordinator answers UNSTABLE_OFFSET_COMMIT (88) rather than
 * the old offset, and we wait. So a new owner never starts from an offset that the previous
 * owner's pending transaction is about to move.
 */
import type { KafkaClient } from './client';
import { protocolErrorType } from './errors';
import { createCluster, ISOLATION, ResettingCluster } from './internals';

const COORDINATOR_MOVED = new Set(['NOT_COORDINATOR_FOR_GROUP', 'GROUP_COORDINATOR_NOT_AVAILABLE', 'GROUP_LOAD_IN_PROGRESS']);

export interface CommittedOffsetsOptions {
  /** How long to wait out UNSTABLE_OFFSET_COMMIT / coordinator moves; default 120 s. */
  deadlineMs?: number;
  /** Called on each UNSTABLE_OFFSET_COMMIT answer (tests and metrics). */
  onUnstable?: () => void;
}

export class CommittedOffsets {
  /**
   * Its connections, new ones after a request timed out (ResettingCluster). A fresh cluster knows no
   * broker but its seed: without the metadata, kafkajs's findGroupCoordinator fails with
   * BrokerNotFound, refreshes it and retries only after its initial retry time (≈ 300 ms, measured
   * as most of a worker's first recovery beyond a warm one): it is read once connected.
   */
  private readonly clusters: ResettingCluster;

  constructor(client: KafkaClient) {
    this.clusters = new ResettingCluster(
      () => createCluster(client, ISOLATION.READ_COMMITTED),
      (cluster) => cluster.refreshMetadata(),
    );
  }

  /**
   * The group's committed offset of each partition (the next offset to consume), or null where
   * the group has none.
   */
  async fetch(
    groupId: string,
    topic: string,
    partitions: number[],
    options: CommittedOffsetsOptions = {},
  ): Promise<Map<number, string | null>> {
    const positions = await this.positions(groupId, topic, partitions, options);
    return new Map([...positions].map(([p, position]) => [p, position?.offset ?? null]));
  }

  /** The same read, with the metadata committed with each offset (null where the group has no offset). */
  async positions(
    groupId: string,
    topic: string,
    partitions: number[],
    options: CommittedOffsetsOptions = {},
  ): Promise<Map<number, { offset: string; metadata: string | null } | null>> {
    const deadline = Date.now() + (options.deadlineMs ?? 120_000);
    let pause = 20;
    for (;;) {
      try {
        const { responses } = await this.clusters.run(async (cluster) =>
          (await cluster.findGroupCoordinator({ groupId })).offsetFetch({
            groupId,
            topics: [{ topic, partitions: partitions.map((partition) => ({ partition })) }],
            requireStable: true,
          }),
        );
        const result = new Map<number, { offset: string; metadata: string | null } | null>(partitions.map((p) => [p, null]));
        for (const response of responses) {
          if (response.topic !== topic) continue;
          for (const { partition, offset, metadata } of response.partitions) {
            result.set(partition, offset === '-1' ? null : { offset, metadata: metadata ?? null });
          }
        }
        return result;
      } catch (err) {
        const type = protocolErrorType(err);
        const retriable = type === 'UNSTABLE_OFFSET_COMMIT' || (type !== undefined && COORDINATOR_MOVED.has(type));
        if (!retriable || Date.now() + pause > deadline) throw err;
        if (type === 'UNSTABLE_OFFSET_COMMIT') options.onUnstable?.();
        else await this.clusters.run((cluster) => cluster.refreshMetadata());
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 500);
      }
    }
  }

  async close(): Promise<void> {
    await this.clusters.close();
  }
}
