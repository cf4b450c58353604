/**
 * A key's live state (`kafka-flow-temporal get`, `GET /flows/<flow>/keys/<key>`): the partition
 * from the key as the producer's partitioner places it, the owner from the partition workflow,
 * the state from the owner (its memory, or its store for a key unloaded from memory); with no live
 * owner that answers, the persisted snapshot, saying why. The I/O is injected (KeySources): the CLI
 * and the worker give their own, the unit tests fakes.
 */
import type { Owner } from '../../activities/types';
import { KafkaFlowError } from '../../config/errors';
import { offsetText } from '../../flow/offsets';
import type { OwnedKey } from '../runtime/flow-runtime';
import { partitionOfKey } from './key-partition';

export interface KeyQuery {
  readonly key: string;
  /** Needed when the flow reads several topics. */
  readonly topic?: string;
  /** Overrides the partitioner (a flow with `remapKey`, a producer with another partitioner). */
  readonly partition?: number;
}

/** What a query needs of the flow. */
export interface QueriedFlow {
  readonly name: string;
  readonly topics: readonly string[];
  readonly remapKey?: unknown;
}

/** What every answer names: the key, where it lives, and its state. */
interface KeyAnswerBase {
  readonly flow: string;
  readonly topic: string;
  readonly partition: number;
  readonly key: string;
  readonly state: unknown;
}

/** The key's state as its owner holds it now. */
export interface OwnerKeyAnswer extends KeyAnswerBase {
  readonly source: 'owner';
  /** The offset of the last record folded into the key. */
  readonly offset: string;
  /** The store holds this state; false: records folded since the key's last write (or a transient flow). */
  readonly persisted: boolean;
  /** `memory`, or `store`: the key was unloaded from memory and read from the owner's store. */
  readonly from: 'memory' | 'store';
  /** The partition's committed offset and position (one past the last record folded). */
  readonly committedOffset: string;
  readonly position: string;
  readonly owner: { readonly generation: number; readonly memberId: string; readonly httpAddress?: string };
}

/** The key's persisted snapshot, read because no live owner answered. */
export interface SnapshotKeyAnswer extends KeyAnswerBase {
  readonly source: 'snapshot';
  readonly offset: string;
  readonly persisted: true;
  /** Why this is not the owner's answer. */
  readonly reason: string;
}

export type KeyAnswer = OwnerKeyAnswer | SnapshotKeyAnswer;

/** Where the partition stands: its owner when a worker folds it, or why there is no live owner. */
export type OwnerLookup = { readonly owner: Owner } | { readonly none: string };

export interface KeySources {
  /** The input topic's partition count (undefined: no such topic). */
  partitionCount(topic: string): Promise<number | undefined>;
  /** The partition workflow's owner, when the partition is running on one. */
  ownerOf(topic: string, partition: number): Promise<OwnerLookup>;
  /** Asks the owner (over HTTP, or this process itself); undefined: it holds nothing for the key. Throws when it cannot answer. */
  askOwner(owner: Owner, topic: string, partition: number, key: string): Promise<OwnerKeyAnswer | undefined>;
  /** The key's persisted snapshot (what `inspect` reads), if any. */
  snapshot(topic: string, partition: number, key: string): Promise<{ offset: string; state: unknown } | undefined>;
}

/** Bad input to a live state query: an unknown topic, a partition out of range, a flow that remaps keys. */
export class KeyQueryError extends KafkaFlowError {
  readonly exitCode = 2;
  constructor(message: string) {
    super('KEY_QUERY', message);
  }
}

/** Neither the owner nor the persisted state holds the key (or the key is deleted). Its message names the key: it goes only to who asked. */
export class KeyNotFoundError extends KafkaFlowError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    where: string,
  ) {
    super('KEY_NOT_FOUND', `no state for the key in ${topic}-${partition} (${where})`);
  }
}

/**
 * The partition's owner runs without an HTTP port (`--metrics-port` / KFT_METRICS_PORT), or
 * predates live state queries: it cannot be asked, and the answer is the persisted snapshot.
 */
export class OwnerWithoutHttpError extends KafkaFlowError {
  constructor(topic: string, partition: number, owner: Owner) {
    super(
      'OWNER_NO_HTTP',
      `the owner of ${topic}-${partition} (${owner.taskQueue}, generation ${owner.generation}) serves no HTTP port: start its workers with --metrics-port (KFT_METRICS_PORT) to query live state`,
    );
  }
}

/** The key's live state from its owner, or its persisted snapshot when no live owner answers. */
export async function queryKey(flow: QueriedFlow, q: KeyQuery, sources: KeySources): Promise<KeyAnswer> {
  const topic = topicOf(flow, q.topic);
  const count = await sources.partitionCount(topic);
  if (count === undefined || count === 0) throw new KeyQueryError(`the input topic "${topic}" does not exist`);
  const partition = partitionOf(flow, q, count);
  const found = await sources.ownerOf(topic, partition);
  let reason: string;
  if ('owner' in found && found.owner.httpAddress) {
    try {
      const answer = await sources.askOwner(found.owner, topic, partition, q.key);
      if (answer === undefined) throw new KeyNotFoundError(topic, partition, `not in its owner's memory or store, generation ${found.owner.generation}`);
      return answer;
    } catch (err) {
      if (err instanceof KeyNotFoundError) throw err;
      reason = `its owner at ${found.owner.httpAddress} did not answer: ${err instanceof Error ? err.message : String(err)}`;
    }
  } else if ('owner' in found) reason = new OwnerWithoutHttpError(topic, partition, found.owner).message;
  else reason = found.none;
  const snapshot = await sources.snapshot(topic, partition, q.key);
  if (!snapshot) throw new KeyNotFoundError(topic, partition, `no live owner (${reason}) and no persisted snapshot`);
  return { source: 'snapshot', flow: flow.name, topic, partition, key: q.key, state: snapshot.state, offset: snapshot.offset, persisted: true, reason };
}

function topicOf(flow: QueriedFlow, topic: string | undefined): string {
  if (topic === undefined) {
    if (flow.topics.length === 1) return flow.topics[0]!;
    throw new KeyQueryError(`flow "${flow.name}" reads several topics (${flow.topics.join(', ')}): say which (--topic, ?topic=)`);
  }
  if (!flow.topics.includes(topic)) throw new KeyQueryError(`flow "${flow.name}" does not read topic "${topic}" (it reads ${flow.topics.join(', ')})`);
  return topic;
}

function partitionOf(flow: QueriedFlow, q: KeyQuery, count: number): number {
  if (q.partition !== undefined) {
    if (!Number.isInteger(q.partition) || q.partition < 0 || q.partition >= count) {
      throw new KeyQueryError(`partition ${q.partition} is out of range: the topic has ${count} partition(s)`);
    }
    return q.partition;
  }
  if (flow.remapKey) {
    throw new KeyQueryError(`flow "${flow.name}" remaps keys (remapKey): the partition cannot be computed from the state key; say which (--partition, ?partition=)`);
  }
  return partitionOfKey(q.key, count);
}

/** The owner's answer to a query of one of its partitions (undefined: it holds nothing for the key, or only its delete). */
export function ownerAnswer(flow: string, topic: string, partition: number, key: string, owned: OwnedKey, httpAddress: string | undefined): OwnerKeyAnswer | undefined {
  const l = owned.lookup;
  if (l === undefined || l.state === undefined) return undefined;
  return {
    source: 'owner',
    flow,
    topic,
    partition,
    key,
    state: l.state,
    offset: offsetText(l.offset),
    persisted: l.persisted,
    from: l.from,
    committedOffset: offsetText(owned.committedOffset),
    position: offsetText(owned.position),
    owner: { generation: owned.generation, memberId: owned.memberId, ...(httpAddress ? { httpAddress } : {}) },
  };
}
