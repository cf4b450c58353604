/**
 * Transactional snapshot writes are fenced by the consumer generation only when the broker takes
 * TxnOffsetCommit v3 (KIP-447, Kafka 2.5+): v3 carries the generation and member id, and the
 * patched kafkajs falls back to v1 — which carries neither — on an older broker (its version
 * negotiation picks the highest version both sides have). A stale owner's snapshots would then
 * land silently. So transactional mode asks the group coordinator's ApiVersions first and refuses
 * an older broker with BrokerTooOldError. A writer that requires transaction version 2
 * (KAFKA_TRANSACTION_VERSION=2) has the same broker checked for it, and is refused with
 * TransactionVersionUnavailableError where the cluster does not speak it.
 */
import { KafkaFlowError } from '../config/errors';
import type { KafkaClient } from './client';
import { createCluster, ISOLATION } from './internals';
import { transactionVersion2Missing, type VersionsWithFeatures } from './protocol/transaction-version';

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

/** Transaction version 2 was required (KAFKA_TRANSACTION_VERSION=2) of a cluster that does not speak it. */
export class TransactionVersionUnavailableError extends KafkaFlowError {
  readonly broker: string;
  readonly missing: readonly string[];
  constructor(broker: string, missing: readonly string[]) {
    super(
      'TRANSACTION_VERSION_UNAVAILABLE',
      `KAFKA_TRANSACTION_VERSION=2 requires transaction version 2 (KIP-890 part 2), which the Kafka broker ${broker} does not speak ` +
        `(${missing.join(', ')}); unset KAFKA_TRANSACTION_VERSION (auto: version 2 where the cluster speaks it) or set it to 1, ` +
        'or upgrade the cluster to Kafka 4.0+ and finalize the feature (kafka-features.sh upgrade --feature transaction.version=2)',
    );
    this.broker = broker;
    this.missing = missing;
  }
}

/** Throws TransactionVersionUnavailableError unless the broker speaks transaction version 2. */
export function requireTransactionVersion2(versions: VersionsWithFeatures, broker: string): void {
  const missing = transactionVersion2Missing(versions);
  if (missing.length > 0) throw new TransactionVersionUnavailableError(broker, missing);
}

const checked = new WeakMap<KafkaClient, Map<string, Promise<void>>>();

/**
 * Asks the group's coordinator (where TxnOffsetCommit goes) for its API versions, once per client,
 * group and requirement (a failed check is not kept: a broker that was unreachable is asked again);
 * with `transactionVersion2`, also whether it speaks transaction version 2.
 */
export function assertFencedTxnOffsetCommit(client: KafkaClient, groupId: string, options: { transactionVersion2?: boolean } = {}): Promise<void> {
  const key = options.transactionVersion2 ? `${groupId}\u0000v2` : groupId;
  let byGroup = checked.get(client);
  if (!byGroup) {
    byGroup = new Map();
    checked.set(client, byGroup);
  }
  let check = byGroup.get(key);
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
        if (options.transactionVersion2) requireTransactionVersion2(coordinator.versions, where);
      } finally {
        await cluster.disconnect().catch(() => undefined);
      }
    })();
    const current = check;
    const groups = byGroup;
    current.catch(() => {
      if (groups.get(key) === current) groups.delete(key);
    });
    byGroup.set(key, check);
  }
  return check;
}
