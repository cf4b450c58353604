/**
 * Output topics — dead-letter topics (one per input topic, see flow/poison.ts) and the topics a
 * fold emits to (`outputTopics`, flow/emit.ts) — and where an output goes in them: created if
 * absent with the input topic's partition count, so input partition p's dead letters go to
 * partition p (modulo the count of a topic that already existed otherwise); an emitted record with
 * a key goes where Kafka's default partitioner puts the key (murmur2), so outputs of one key stay
 * in order on one partition whoever produces them.
 * Transactional persistence produces them inside the key's snapshot transaction; caching mode and
 * Cassandra produce them with `OutputProducer` (acks=all) before the writes and the offset commit
 * that pass their records — at least once (emitted records carry the `kafka-flow-source` header).
 */
import type { Logger } from '../../core/logger';
import { silentLogger } from '../../core/logger';
import type { KafkaAdmin } from '../../kafka/admin';
import { keyPartition } from '../../kafka/internals';
import type { PlainWriter } from '../../kafka/plain-writer';
import type { SnapshotMessage } from '../../kafka/transactional-writer';
import type { OutputSender } from '../output-sender';
import { EmittedOutputs, type PendingOutput, Route } from '../../core/emitted-outputs';
import { partitionOfHash } from '../../core/murmur2';
import type { TopicPartition } from '../../core/persistence-types';

export class OutputTopics {
  private readonly counts = new Map<string, Promise<number>>();

  constructor(
    private readonly admin: KafkaAdmin,
    private readonly options: { replicationFactor?: number; logger?: Logger } = {},
  ) {}

  /** Creates `topic` if absent (`partitions` partitions, plain retention); resolves to its partition count. */
  ensure(topic: string, partitions: number): Promise<number> {
    let count = this.counts.get(topic);
    if (!count) {
      count = (async () => {
        const existing = await this.admin.describeTopic(topic);
        if (existing) return existing.partitions;
        await this.admin.ensureTopics([{ topic, partitions, replicationFactor: this.options.replicationFactor ?? 1 }]);
        (this.options.logger ?? silentLogger).info({ topic, partitions }, 'output topic created');
        return (await this.admin.describeTopic(topic))?.partitions ?? partitions;
      })();
      this.counts.set(topic, count);
      count.catch(() => this.counts.delete(topic));
    }
    return count;
  }

  /**
   * The outputs as messages for a producer (a topic not ensured yet is created with enough
   * partitions for `from`). With an output per input record a transaction carries tens of
   * thousands of them, so: each topic's partition count is awaited once per call, not per record;
   * a key's emitted outputs come as one EmittedOutputs (their bytes encoded at emit time, their
   * key's murmur2 hash with them), turned into messages that point at those bytes; and a record's
   * murmur2 partition is computed once for a run of its key's outputs.
   */
  async messages(outputs: readonly PendingOutput[], from: TopicPartition, pool?: MessagePool): Promise<SnapshotMessage[]> {
    const counts = new Map<string, number>();
    let total = 0;
    for (const o of outputs) {
      if (o instanceof EmittedOutputs) {
        total += o.count;
        for (const topic of o.topics) if (!counts.has(topic)) counts.set(topic, await this.ensure(topic, from.partition + 1));
      } else {
        total++;
        if (!counts.has(o.topic)) counts.set(o.topic, await this.ensure(o.topic, from.partition + 1));
      }
    }
    const out: SnapshotMessage[] = new Array(total);
    let n = 0;
    let last: { topic: string; key: string; partition: number } | undefined;
    for (const o of outputs) {
      if (o instanceof EmittedOutputs) {
        n = emittedMessages(o, counts, from.partition, out, n, pool);
        continue;
      }
      const count = counts.get(o.topic)!;
      let partition = o.partition;
      if (partition === undefined) {
        if (o.kind !== 'emitted' || o.key === null) partition = from.partition % count;
        else if (typeof o.key === 'string' && last !== undefined && last.key === o.key && last.topic === o.topic) partition = last.partition;
        else {
          partition = keyPartition(o.key, count);
          if (typeof o.key === 'string') last = { topic: o.topic, key: o.key, partition };
        }
      }
      // The record's own headers object: nothing downstream changes it (a copy per output was a
      // measurable share of the produce path with an output per record).
      out[n++] = { topic: o.topic, partition, key: o.key ?? '', value: o.value, headers: o.headers as SnapshotMessage['headers'] };
    }
    return out;
  }
}

/**
 * Message objects of emitted outputs, kept by one producer of transactions for its next ones (an
 * object per output per transaction was a share of the garbage collection with an output per
 * record). Its user must not build messages from it while an earlier transaction built from it
 * is still in flight: kafkajs reads them until the transaction's records are sent.
 */
export interface MessagePool {
  readonly messages: SnapshotMessage[];
}

/** At most this many message objects are kept by a pool (more in one transaction are made afresh). */
const POOL_MAX = 32_768;

/** A key's encoded outputs as messages pointing at their bytes, from `out[n]`; returns the next index. */
function emittedMessages(o: EmittedOutputs, counts: ReadonlyMap<string, number>, inputPartition: number, out: SnapshotMessage[], n: number, pool: MessagePool | undefined): number {
  const bytes = o.bytes;
  const kept = pool?.messages;
  let start = 0;
  for (let i = 0; i < o.count; i++) {
    const topic = o.topic(i);
    const count = counts.get(topic)!;
    const route = o.route(i);
    const partition =
      route === Route.KeyHash ? partitionOfHash(o.routeValue(i), count) : route === Route.Partition ? o.routeValue(i) : inputPartition % count;
    const end = o.end(i);
    // The pool's n-th object serves the transaction's n-th message (of any kind: out[n] is ours).
    let m = kept !== undefined && n < kept.length ? kept[n] : undefined;
    if (m === undefined) {
      m = { topic, partition, key: '', value: null, encoded: bytes, encodedStart: start, encodedEnd: end };
      if (kept !== undefined && n === kept.length && n < POOL_MAX) kept.push(m);
    } else {
      m.topic = topic;
      m.partition = partition;
      m.encoded = bytes;
      m.encodedStart = start;
      m.encodedEnd = end;
    }
    out[n++] = m;
    start = end;
  }
  return n;
}

/** Produces outputs (acks=all) outside a transaction: at least once, before what passes their records. */
export class OutputProducer implements OutputSender {
  constructor(
    private readonly topics: OutputTopics,
    private readonly writer: PlainWriter,
  ) {}

  async send(outputs: readonly PendingOutput[], from: TopicPartition): Promise<void> {
    if (outputs.length === 0) return;
    await this.writer.send(await this.topics.messages(outputs, from));
  }
}
