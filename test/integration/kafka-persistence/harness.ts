/**
 * A partition owner as a worker process has it, on the real broker: a kafkajs group member (with
 * the awaited revoke point and its live generation), the engine (PartitionFlow) for input
 * partition 0, and the Kafka snapshot backend (or another persistence: `persistence`).
 * `freeze()` stalls it for real: its next batch blocks inside eachBatch after folding, so it stops
 * heartbeating and the group coordinator evicts it at its rebalance timeout — a GC pause, as far
 * as Kafka can tell.
 */
import type { Consumer, EachBatchPayload } from 'kafkajs';
import { Registry } from 'prom-client';
import { OUTPUT_SOURCE_HEADER, type OutputOptions } from '../../../flow/emit';
import type { Fold } from '../../../flow/fold';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow, type PersistResult } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { type GroupGeneration, GroupMembership } from '../../../kafka/group-membership';
import { PartitionReader, type ReadRecord } from '../../../kafka/partition-reader';
import { withRevokePoint } from '../../../kafka/revoke-point';
import { KafkaSnapshotBackend, type KafkaSnapshotBackendOptions } from '../../../persistence/kafka/backend';
import type { KafkaPartitionPersistence } from '../../../persistence/kafka/kafka-partition-persistence';
import type { OffsetCommitter } from '../../../persistence/offset-committer';
import type { PartitionPersistence } from '../../../flow/ports';
import { fastGroup, waitFor } from '../../support/servers';

/** The test flow's state: every event value folded into the key, in order. */
export interface Events {
  events: string[];
}

export const eventsFold = (state: Events | undefined, record: { value: string }): Events => ({
  events: [...(state?.events ?? []), record.value],
});

export const textCodec = { encode: (s: string) => Buffer.from(s), decode: (b: Buffer) => b.toString('utf8') };

/** A recovered snapshot as plain data: a lazy one (its state decoded when read) is decoded here. */
export function decodedSnapshot<S>(snapshot: { readonly state: S; readonly offset: number }): { state: S; offset: number } {
  return { state: snapshot.state, offset: snapshot.offset };
}

/** `e<from>` … `e<to>`: the event values the tests produce. */
export const events = (from: number, to: number): string[] => Array.from({ length: to - from + 1 }, (_, i) => `e${from + i}`);

/** eventsFold, and key `k` emits one output per record (its value) to `topic`; other keys emit nothing. */
export function emittingFold(topic: string): Fold<Events, string> {
  return (state, record, ctx) => {
    if (record.key === 'k') ctx.emit({ topic, key: record.key, value: record.value });
    return eventsFold(state, record);
  };
}

/** The `outputs` option of an Owner whose fold emits text values to `topic`. */
export const textOutputs = (topic: string): OutputOptions => ({ topics: new Set([topic]), encoder: { encode: (v) => Buffer.from(String(v)) } });

/**
 * Builds the partition's persistence at recovery, for an owner that does not persist to the
 * Kafka snapshot backend (Cassandra): the generation the group assigned the partition under, and
 * a committer through the owner's consumer (fenced by that generation, as a worker's).
 */
export type PersistenceFactory = (ownership: { generation: GroupGeneration; committer: OffsetCommitter }) => Promise<PartitionPersistence<Events, string>>;

export interface OwnerOptions {
  client: KafkaClient;
  name: string;
  groupId: string;
  input: string;
  /** The Kafka snapshot backend's options; or `persistence` instead. */
  backend?: Omit<KafkaSnapshotBackendOptions<Events>, 'client' | 'inputTopic' | 'groupId'>;
  persistence?: PersistenceFactory;
  /** Short, so a frozen owner is evicted quickly (the broker's minimum session timeout is 6 s). */
  rebalanceTimeout?: number;
  flushOnRevoke?: boolean;
  /** Default eventsFold. */
  fold?: Fold<Events, string>;
  /** The output topics the fold may emit to (ctx.emit). */
  outputs?: OutputOptions;
}

export interface RevokeRecord {
  generationId: number;
  result?: PersistResult;
  error?: unknown;
}

export class Owner {
  private readonly kafkaBackend: KafkaSnapshotBackend<Events, string> | undefined;
  readonly membership = new GroupMembership();
  readonly consumer: Consumer;
  readonly revokes: RevokeRecord[] = [];
  flow: PartitionFlow<Events, string> | undefined;
  /** The Kafka snapshot backend's partition persistence (an owner with `backend`). */
  persistence: KafkaPartitionPersistence<Events, string> | undefined;
  /** The owner is blocked inside eachBatch (frozen). */
  stuck = false;
  private gate: { promise: Promise<void>; release: () => void } | undefined;
  private readonly o: OwnerOptions;
  private readonly offsets: CommittedOffsets;

  constructor(o: OwnerOptions) {
    this.o = o;
    if (!o.backend === !o.persistence) throw new TypeError('an Owner persists either to the Kafka snapshot backend (backend) or elsewhere (persistence)');
    this.kafkaBackend = o.backend
      ? new KafkaSnapshotBackend<Events, string>({ ...o.backend, client: o.client, inputTopic: o.input, groupId: o.groupId })
      : undefined;
    this.offsets = new CommittedOffsets(o.client);
    this.consumer = o.client.kafka.consumer(
      withRevokePoint(
        { ...fastGroup, groupId: o.groupId, sessionTimeout: 6_000, rebalanceTimeout: o.rebalanceTimeout ?? 3_000, readUncommitted: false },
        async (revoked) => {
          const record: RevokeRecord = { generationId: revoked.generationId };
          const flow = this.flow;
          if (flow && flow.failed === undefined) {
            try {
              record.result = await flow.persist(Date.now(), 'revoke');
            } catch (err) {
              record.error = err;
            }
          }
          this.revokes.push(record);
        },
      ),
    );
    this.membership.attach(this.consumer);
    // As the worker does: a newly assigned partition stays paused until it is recovered.
    this.membership.onJoin((g) => {
      if ((g.assignment[o.input] ?? []).length > 0) this.consumer.pause([{ topic: o.input, partitions: g.assignment[o.input]! }]);
    });
  }

  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.o.input, fromBeginning: true });
    await this.consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (p) => this.eachBatch(p) });
  }

  /** Waits until this member's live generation assigns it input partition 0 (after `after`). */
  async owns(timeoutMs = 30_000, after = Number.NEGATIVE_INFINITY): Promise<number> {
    let generation = -1;
    await waitFor(
      `${this.o.name} to own ${this.o.input}-0`,
      () => {
        const g = this.membership.current();
        if (g && g.generationId > after && (g.assignment[this.o.input] ?? []).includes(0)) generation = g.generationId;
        return generation >= 0;
      },
      timeoutMs,
    );
    return generation;
  }

  /** The Kafka snapshot backend (an owner with `backend`). */
  get backend(): KafkaSnapshotBackend<Events, string> {
    if (!this.kafkaBackend) throw new TypeError(`owner ${this.o.name} does not persist to the Kafka snapshot backend`);
    return this.kafkaBackend;
  }

  /** Recovery as the worker does it: the backend fences first, the engine reads, the consumer resumes. */
  async recover(): Promise<number> {
    const committer: OffsetCommitter = {
      commit: async (_tp, offset) => {
        await this.consumer.commitOffsets([{ topic: this.o.input, partition: 0, offset: String(offset) }]);
      },
    };
    let persistence: PartitionPersistence<Events, string>;
    if (this.kafkaBackend) {
      const kafka = await this.kafkaBackend.forPartition({ topic: this.o.input, partition: 0, generation: () => this.membership.current(), committer });
      this.persistence = kafka;
      persistence = kafka;
    } else {
      const generation = this.membership.current();
      if (!generation) throw new Error(`owner ${this.o.name} recovers without a generation`);
      persistence = await this.o.persistence!({ generation, committer });
    }
    const committed = (await this.offsets.fetch(this.o.groupId, this.o.input, [0])).get(0) ?? '0';
    const flow = new PartitionFlow<Events, string>({
      flow: this.o.name,
      topic: this.o.input,
      partition: 0,
      assignedAt: committed,
      fold: this.o.fold ?? eventsFold,
      codec: textCodec,
      outputs: this.o.outputs,
      persistence,
      mode: 'snapshots',
      timers: timerPolicy({ persistPeriodically: { fireEvery: 0, persistEvery: 0, flushOnRevoke: this.o.flushOnRevoke ?? false } }),
      metrics: FlowMetrics.of(new Registry()),
    });
    const keys = await flow.recover();
    this.flow = flow;
    this.consumer.seek({ topic: this.o.input, partition: 0, offset: committed });
    this.consumer.resume([{ topic: this.o.input, partitions: [0] }]);
    return keys;
  }

  /** The workflow's periodic persist: run the key timers, persist what is due. */
  async persistPeriodically(): Promise<PersistResult> {
    const flow = this.flow!;
    flow.triggerTimers(Date.now());
    return flow.persist(Date.now(), 'periodic');
  }

  /** Waits until the engine has handled every offset below `offset`. */
  folded(offset: number, timeoutMs = 30_000): Promise<void> {
    return waitFor(`${this.o.name} to fold up to offset ${offset}`, () => (this.flow?.position ?? 0) >= offset, timeoutMs);
  }

  /** The next batch with records blocks after it was folded, until thaw(). */
  freeze(): void {
    let release!: () => void;
    const promise = new Promise<void>((r) => {
      release = r;
    });
    this.gate = { promise, release };
  }

  thaw(): void {
    const gate = this.gate;
    this.gate = undefined;
    gate?.release();
  }

  async stop(): Promise<void> {
    this.thaw();
    try {
      await this.consumer.disconnect();
    } finally {
      await this.offsets.close().catch(() => undefined);
      await this.kafkaBackend?.close();
    }
  }

  private async eachBatch({ batch, resolveOffset }: EachBatchPayload): Promise<void> {
    const flow = this.flow;
    if (!flow || flow.failed !== undefined || batch.partition !== 0 || batch.messages.length === 0) return;
    const pending = flow.handleBatch(batch.messages);
    if (pending) await pending;
    resolveOffset(batch.lastOffset()); // the fetch position moves on (nothing is committed by kafkajs)
    const gate = this.gate;
    if (gate && batch.messages.length > 0) {
      this.stuck = true;
      await gate.promise; // no heartbeats from here on: the coordinator will evict this member
      this.stuck = false;
    }
  }
}

/** Produces `values` to input partition 0 under one key. */
export async function produce(client: KafkaClient, topic: string, key: string, values: readonly string[]): Promise<void> {
  const producer = client.kafka.producer({ idempotent: true, maxInFlightRequests: 1 }); // a retried send writes nothing twice
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: values.map((value) => ({ partition: 0, key, value })) });
  } finally {
    await producer.disconnect();
  }
}

/** Every committed record of `topic`'s partition 0 (read_committed, no group), in offset order. */
export async function readCommitted(client: KafkaClient, topic: string): Promise<ReadRecord[]> {
  const reader = new PartitionReader(client);
  const got: ReadRecord[] = [];
  try {
    await reader.read({ topic, partition: 0, fromOffset: '0', stallTimeoutMs: 10_000, onRecords: (rs) => void got.push(...rs) });
  } finally {
    await reader.close();
  }
  return got;
}

/** What a fresh reader (no group, no fence) finds in the snapshot topic, by key. */
export async function snapshotsOf<S>(backend: KafkaSnapshotBackend<S, unknown>, partition = 0): Promise<Map<string, { offset: string; state: S }>> {
  const found = new Map<string, { offset: string; state: S }>();
  for await (const s of backend.readAll(partition)) found.set(s.key, { offset: s.offset, state: s.state });
  return found;
}

/** A log sink that keeps messages, for asserting what an operator would see. */
export function recordingLogger() {
  const lines: Array<{ level: string; msg: string; obj: unknown }> = [];
  const at = (level: string) => (obj: unknown, msg?: string) => {
    lines.push({ level, msg: msg ?? (typeof obj === 'string' ? obj : ''), obj });
  };
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') } };
}

/** An output record's `kafka-flow-source` header (`<topic>/<partition>/<offset>/<index>`); throws if it has none. */
export function sourceOf(r: ReadRecord): string {
  const h = r.headers[OUTPUT_SOURCE_HEADER];
  if (h === undefined) throw new Error(`output at offset ${r.offset} (value ${String(r.value)}) has no ${OUTPUT_SOURCE_HEADER} header`);
  return String(Array.isArray(h) ? h[0] : h);
}

const sourceOrder = (s: string) => s.split('/').slice(-2).map(Number) as [number, number];

/**
 * What an at-least-once consumer keeps: one record per `kafka-flow-source`, ordered by the source
 * record's offset and emit index. Throws when two copies of a source differ in value (they must
 * be the same emit again).
 */
export function dedupeBySource(records: readonly ReadRecord[]): Array<{ source: string; value: string }> {
  const bySource = new Map<string, string>();
  for (const r of records) {
    const source = sourceOf(r);
    const value = String(r.value);
    const seen = bySource.get(source);
    if (seen !== undefined && seen !== value) throw new Error(`two outputs with source ${source} differ: ${seen} and ${value}`);
    bySource.set(source, value);
  }
  return [...bySource]
    .map(([source, value]) => ({ source, value }))
    .sort((x, y) => {
      const [xo, xi] = sourceOrder(x.source);
      const [yo, yi] = sourceOrder(y.source);
      return xo - yo || xi - yi;
    });
}

/** How many copies of each `kafka-flow-source` landed. */
export function countBySource(records: readonly ReadRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of records) {
    const source = sourceOf(r);
    counts[source] = (counts[source] ?? 0) + 1;
  }
  return counts;
}
