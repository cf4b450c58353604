/**
 * Transactional snapshot writes are fenced by the consumer generation only when the broker takes
 * TxnOffsetCommit v3 (KIP-447, Kafka 2.5+): v3 carries the generation and member id, and the
 * patched kafkajs falls back to v1 — which carries neither — on an older broker (its version
 * negotiation picks the highest version both sides have). A stale owner's snapshots would then
 * land silently. So transactional mode asks the group coordinator's ApiVersions first and refuses
 * an older broker with BrokerTooOldError.
 */
import { KafkaFlowError } from '../config/errors';
import type { KafkaClient } from './client';
import { createCluster, ISOLATION } from './internals';

/** ApiVersions key of TxnOffsetCommit. */
export const TXN_OFFSET_COMMIT_API_KEY = 28;
/** The first TxnOffsetCommit version with generation_id and member_id (KIP-447). */
export const TXN_OFFSET_COMMIT_FENCED_VERSION = 3;

export type ApiVersions = Record<number, { minVersion: number; maxVersion: number } | undefined>;

/** The broker cannot fence transactional offset commits by consumer generation (Kafka before 2.5). */
export class BrokerTooOldError extends KafkaFlowError {
  readonly broker: string;
  readonly maxVersion: number | undefined;
  constructor(broker: string, maxVersion: number | undefined) {
    super(
      'BROKER_TOO_OLD',
      `the Kafka broker ${broker} supports TxnOffsetCommit up to ${maxVersion === undefined ? '(none)' : `v${maxVersion}`}, but transactional persistence ` +
        `needs v${TXN_OFFSET_COMMIT_FENCED_VERSION} (KIP-447, Kafka 2.5 or later) to fence stale owners by consumer generation; ` +
        "upgrade the brokers, or use persistence { backend: 'kafka', transactional: false } (no stale-owner fencing)",
    );
    this.broker = broker;
    this.maxVersion = maxVersion;
  }
}

/** Throws BrokerTooOldError unless `versions` (a broker's ApiVersions answer) includes TxnOffsetCommit v3. */
export function requireFencedTxnOffsetCommit(versions: ApiVersions, broker: string): void {
  const v = versions[TXN_OFFSET_COMMIT_API_KEY];
  if (!v || v.maxVersion < TXN_OFFSET_COMMIT_FENCED_VERSION || v.minVersion > TXN_OFFSET_COMMIT_FENCED_VERSION) {
    throw new BrokerTooOldError(broker, v?.maxVersion);
  }
}

const checked = new WeakMap<KafkaClient, Map<string, Promise<void>>>();

/**
 * Asks the group's coordinator (where TxnOffsetCommit goes) for its API versions, once per client
 * and group (a failed check is not kept: a broker that was unreachable is asked again).
 */
export function assertFencedTxnOffsetCommit(client: KafkaClient, groupId: string): Promise<void> {
  let byGroup = checked.get(client);
  if (!byGroup) {
    byGroup = new Map();
    checked.set(client, byGroup);
  }
  let check = byGroup.get(groupId);
  if (!check) {
    check = (async () => {
      const cluster = createCluster(client, ISOLATION.READ_COMMITTED);
      try {
        await cluster.connect();
        // The brokers' metadata first: without it findGroupCoordinator waits ≈ 300 ms (see committed-offsets.ts).
        await cluster.refreshMetadata();
        const coordinator = (await cluster.findGroupCoordinator({ groupId })) as unknown as { versions: ApiVersions; connectionPool?: { host?: string; port?: number } };
        const where = coordinator.connectionPool?.host ? `${coordinator.connectionPool.host}:${coordinator.connectionPool.port}` : client.brokers.join(',');
        requireFencedTxnOffsetCommit(coordinator.versions, where);
      } finally {
        await cluster.disconnect().catch(() => undefined);
      }
    })();
    const current = check;
    const groups = byGroup;
    current.catch(() => {
      if (groups.get(groupId) === current) groups.delete(groupId);
    });
    byGroup.set(groupId, check);
  }
  return check;
}
