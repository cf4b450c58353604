/**
 * Hanging transactions: a transaction of a producer left open on a partition although its
 * coordinator ended it — its COMMIT or ABORT marker never written there. read_committed readers of
 * that partition stop at the transaction's first offset for good, and on the group's offsets
 * partition its pending offset commit keeps OffsetFetch(require_stable) answering
 * UNSTABLE_OFFSET_COMMIT for good. Kafka 4.3.1 leaves one behind when it is killed between writing a
 * transaction's PrepareAbort/PrepareCommit and its markers: restarted, its coordinator resends the
 * markers before the broker knows the partitions' leaders, logs "Couldn't find leader endpoint …
 * likely deleted already", skips them and completes the transaction (chaos run dc3dd0b, seed
 * 20261235: the group's offsets partition and an output partition).
 *
 * A partition's producer, just initialized (InitProducerId: its coordinator has ended every earlier
 * transaction of its transactional id, markers written or skipped), can tell them apart from live
 * ones: any transaction of its producer id still open with an epoch below the one it was given is
 * hanging. It ends them with WriteTxnMarkers to the partition's leader, with the producer epoch and
 * coordinator epoch DescribeProducers reports, and the outcome its coordinator decided where that is
 * known: the transactional id's state read before the initialization (DescribeTransactions) — a
 * transaction preparing or completing its commit then is committed on the partitions that missed
 * the marker (aborting them would drop a committed transaction's outputs, or its snapshots under an
 * offset committed elsewhere); one ongoing (the initialization aborts it) or aborting is aborted.
 * Anything older or unknown is aborted, as an operator would (`kafka-transactions.sh abort`).
 */
import type { KafkaClient } from './client';
import { createCluster, createErrorFromCode, type InternalCluster, ISOLATION, ResettingCluster } from './internals';
import { type DescribedPartition, describeProducersV0, type TopicPartitions } from './protocol/describe-producers-v0';
import type { KafkajsProtocol } from './protocol/kafkajs-protocol';
import { describeTransactionsV0, type TransactionState } from './protocol/describe-transactions-v0';
import { type MarkerResult, writeTxnMarkersV1 } from './protocol/write-txn-markers-v1';

export type { TransactionState } from './protocol/describe-transactions-v0';

/** FindCoordinator's key type of a transaction coordinator. */
const TRANSACTION_COORDINATOR = 1;

export type { TopicPartitions } from './protocol/describe-producers-v0';

/** Partitions to check: `partitions` of `topic`, or all of them. */
export interface CheckScope {
  readonly topic: string;
  readonly partitions?: readonly number[];
}

export const GROUP_OFFSETS_TOPIC = '__consumer_offsets';

export interface HangingTransaction {
  readonly topic: string;
  readonly partition: number;
  readonly producerId: string;
  readonly producerEpoch: number;
  readonly coordinatorEpoch: number;
  /** The transaction's first offset on the partition: where read_committed readers stop. */
  readonly startOffset: string;
}

/** A transaction open on a partition, as its leader reports it. */
export interface OpenTransaction {
  readonly producerId: string;
  readonly producerEpoch: number;
  /** Its first offset on the partition: read_committed readers stop there until it ends. */
  readonly startOffset: string;
}

export interface ProducerIdentity {
  readonly producerId: string;
  readonly producerEpoch: number;
}

export interface RepairResult {
  readonly found: readonly HangingTransaction[];
  readonly aborted: readonly HangingTransaction[];
  /** Those committed: their coordinator had decided to commit them (`before`). */
  readonly committed: readonly HangingTransaction[];
  /** Those the brokers refused to end, with kafkajs's error type (e.g. CLUSTER_AUTHORIZATION_FAILED without ClusterAction). */
  readonly refused: ReadonlyArray<HangingTransaction & { readonly error: string }>;
  /** Partitions that could not be described (no leader, not authorized …), with the error type. */
  readonly unchecked: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly error: string }>;
}

const errorType = (code: number): string => (createErrorFromCode(code) as Error & { type?: string }).type ?? `error ${code}`;

/** The partition of `__consumer_offsets` that holds `groupId`'s offsets: Kafka's abs(String.hashCode) modulo its partition count. */
export function groupOffsetsPartition(groupId: string, partitionCount: number): number {
  let hash = 0;
  for (let i = 0; i < groupId.length; i++) hash = (Math.imul(31, hash) + groupId.charCodeAt(i)) | 0;
  return (hash === -2147483648 ? 0 : Math.abs(hash)) % partitionCount;
}

const COMMITTING = new Set(['PrepareCommit', 'CompleteCommit']);

/**
 * Whether hanging transaction `h` is to be committed: `before`, its transactional id's state read
 * before the initialization, is of the same producer id and of `h`'s transaction (its epoch, or the
 * one after: transaction version 2 bumps it at the end, and an epoch fence bumps it too) and was
 * committing. Otherwise (aborting, ongoing, another or an unknown transaction) it is aborted.
 */
export function commitsHanging(h: HangingTransaction, before: TransactionState | undefined): boolean {
  if (before === undefined || before.errorCode !== 0 || before.producerId !== h.producerId) return false;
  const sameTransaction = h.producerEpoch === before.producerEpoch || h.producerEpoch === before.producerEpoch - 1;
  return sameTransaction && COMMITTING.has(before.state);
}

/** Which of `described` hold a transaction of `producer`'s id open with an epoch below its current one. */
export function hangingOf(described: readonly DescribedPartition[], producer: ProducerIdentity): HangingTransaction[] {
  const hanging: HangingTransaction[] = [];
  for (const d of described) {
    if (d.errorCode !== 0) continue;
    for (const p of d.activeProducers) {
      if (p.producerId !== producer.producerId || p.currentTxnStartOffset === '-1' || p.producerEpoch >= producer.producerEpoch) continue;
      hanging.push({ topic: d.topic, partition: d.partition, producerId: p.producerId, producerEpoch: p.producerEpoch, coordinatorEpoch: p.coordinatorEpoch, startOffset: p.currentTxnStartOffset });
    }
  }
  return hanging;
}

/** kafkajs's cached metadata of a target topic's partitions. */
const metadataOf = (cluster: InternalCluster, topic: string): Array<{ partitionId: number }> =>
  (cluster as unknown as { findTopicPartitionMetadata(topic: string): Array<{ partitionId: number }> }).findTopicPartitionMetadata(topic);

interface SendingBroker {
  connectionPool: { send<T>(protocol: KafkajsProtocol<T>): Promise<T> };
}

export class HangingTransactions {
  /** Its connections, new ones after a request timed out (ResettingCluster). */
  private readonly clusters: ResettingCluster;

  constructor(client: KafkaClient) {
    this.clusters = new ResettingCluster(() => createCluster(client, ISOLATION.READ_COMMITTED));
  }

  /**
   * Finds and aborts the hanging transactions of `producer`'s id on `where` and on the group's
   * offsets partition (`groupId`). Call it right after the producer's initialization, before its
   * first transaction.
   */
  repair(producer: ProducerIdentity, where: readonly CheckScope[], groupId?: string, before?: TransactionState): Promise<RepairResult> {
    return this.clusters.run((cluster) => this.repairOn(cluster, producer, where, groupId, before));
  }

  /** The coordinator's state of `transactionalId` (DescribeTransactions); read before an initialization, for `repair`. */
  transactionState(transactionalId: string): Promise<TransactionState | undefined> {
    return this.clusters.run(async (cluster) => {
      const find = cluster.findGroupCoordinator as unknown as (args: { groupId: string; coordinatorType: number }) => Promise<SendingBroker>;
      const coordinator = await find.call(cluster, { groupId: transactionalId, coordinatorType: TRANSACTION_COORDINATOR });
      const states = await coordinator.connectionPool.send(describeTransactionsV0([transactionalId]));
      return states.find((s) => s.transactionalId === transactionalId);
    });
  }

  async close(): Promise<void> {
    await this.clusters.close();
  }

  private async repairOn(cluster: InternalCluster, producer: ProducerIdentity, where: readonly CheckScope[], groupId: string | undefined, before: TransactionState | undefined): Promise<RepairResult> {
    for (const { topic } of where) await cluster.addTargetTopic(topic);
    const scope: TopicPartitions[] = where.map(({ topic, partitions }) => ({ topic, partitions: partitions ?? metadataOf(cluster, topic).map((p) => p.partitionId) }));
    if (groupId !== undefined) scope.push({ topic: GROUP_OFFSETS_TOPIC, partitions: [await this.offsetsPartition(cluster, groupId)] });
    const described = await describeProducers(cluster, scope);
    const unchecked = described.filter((d) => d.errorCode !== 0).map((d) => ({ topic: d.topic, partition: d.partition, error: errorType(d.errorCode) }));
    const found = hangingOf(described, producer);
    if (found.length === 0) return { found, aborted: [], committed: [], refused: [], unchecked };

    const commits = new Map(found.map((h) => [h, commitsHanging(h, before)]));
    const results: MarkerResult[] = [];
    for (const [broker, topics] of await byLeader(cluster, found.map((h) => ({ topic: h.topic, partitions: [h.partition] })))) {
      const here = found.filter((h) => topics.some((t) => t.topic === h.topic && t.partitions.includes(h.partition)));
      const markers = here.map((h) => ({ producerId: h.producerId, producerEpoch: h.producerEpoch, commit: commits.get(h) === true, coordinatorEpoch: h.coordinatorEpoch, topics: [{ topic: h.topic, partitions: [h.partition] }] }));
      results.push(...(await broker.connectionPool.send(writeTxnMarkersV1(markers))));
    }
    const outcome = (h: HangingTransaction) => results.find((r) => r.topic === h.topic && r.partition === h.partition && r.producerId === h.producerId);
    const ended = found.filter((h) => outcome(h)?.errorCode === 0);
    const aborted = ended.filter((h) => commits.get(h) !== true);
    const committed = ended.filter((h) => commits.get(h) === true);
    const refused = found.filter((h) => outcome(h)?.errorCode !== 0).map((h) => ({ ...h, error: errorType(outcome(h)?.errorCode ?? -1) }));
    return { found, aborted, committed, refused, unchecked };
  }

  private async offsetsPartition(cluster: InternalCluster, groupId: string): Promise<number> {
    await cluster.addTargetTopic(GROUP_OFFSETS_TOPIC);
    const count = metadataOf(cluster, GROUP_OFFSETS_TOPIC).length;
    if (count === 0) throw new Error(`no metadata for ${GROUP_OFFSETS_TOPIC}`);
    return groupOffsetsPartition(groupId, count);
  }
}

/** `scope`'s partitions by their leader's broker (metadata refreshed first). */
async function byLeader(cluster: InternalCluster, scope: readonly TopicPartitions[]): Promise<Map<SendingBroker, TopicPartitions[]>> {
  await cluster.refreshMetadata();
  const byNode = new Map<string, TopicPartitions[]>();
  for (const { topic, partitions } of scope) {
    for (const [nodeId, ps] of Object.entries(cluster.findLeaderForPartitions(topic, [...partitions]))) {
      const list = byNode.get(nodeId) ?? [];
      list.push({ topic, partitions: ps });
      byNode.set(nodeId, list);
    }
  }
  const byBroker = new Map<SendingBroker, TopicPartitions[]>();
  for (const [nodeId, topics] of byNode) byBroker.set((await cluster.findBroker({ nodeId })) as unknown as SendingBroker, topics);
  return byBroker;
}

/**
 * The producers of `scope`'s partitions as their leaders see them (DescribeProducers, one request per
 * leader); a partition the leader could not describe carries its error code.
 */
export async function describeProducers(cluster: InternalCluster, scope: readonly TopicPartitions[]): Promise<DescribedPartition[]> {
  const described: DescribedPartition[] = [];
  for (const [broker, topics] of await byLeader(cluster, scope)) described.push(...(await broker.connectionPool.send(describeProducersV0(topics))));
  return described;
}
