// The raw-client floor of bench:outputs: kafkajs's own exactly-once consume-transform-produce loop,
// as its documentation shows it — a group consumer with `eachBatch`, the same per-key totals as
// the bench flow (JSON-parsed values, a new state object per record), and per batch one
// transaction that carries the batch's outputs (when `outputTopic` is given: one record per input
// record, `{key, n, count, total}` keyed by the input key, as bench/flows/totals.ts emits) and the
// batch's offset (sendOffsets). Without an output topic the transaction carries the offset alone,
// so the pair differs only in the outputs. Timed like every contestant: until the group's committed
// offsets reach the end offsets; steady from the first batch.
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import { startProgress } from './progress';
import { type ContestantResult, FirstBatch, foldTotals } from './raw';
import { benchKafka, deleteGroups, type Totals, uniqueName } from './records';

/** Outputs per send: ≈ 80 bytes each, well under the broker's 1 MiB per record batch. */
const SEND_CHUNK = 5_000;
/**
 * BENCH_RAW_SOURCE_HEADER=1: each output also carries a `kafka-flow-source` header shaped as our
 * worker writes it (`<topic>/<partition>/<offset>/0`), so the two produce the same bytes — what
 * the header costs the client and the broker.
 */
const SOURCE_HEADER = process.env.BENCH_RAW_SOURCE_HEADER === '1';

export interface RawTransformOptions {
  topic: string;
  /** Emit an output per record here; undefined: offsets only. */
  outputTopic?: string;
  /** The output topic's partitions (created here). */
  outputPartitions: number;
  label: string;
  timeoutMs?: number;
}

export async function rawKafkajsTransform(options: RawTransformOptions): Promise<ContestantResult> {
  const end = await readEndOffsets(options.topic);
  const records = totalOf(end);
  const groupId = uniqueName('bench-raw-eos');
  const timeoutMs = options.timeoutMs ?? 600_000;
  const progress = startProgress(options.label, records, { plainEveryMs: 5_000 });
  const start = process.hrtime.bigint();
  let failed: Error | undefined;
  const reached = waitForCommittedEnd({ groupId, topic: options.topic, end, timeoutMs, failure: () => failed });
  reached.catch(() => undefined);
  const kafka = benchKafka('bench-raw-eos');
  const consumer = kafka.consumer({ groupId });
  const producer = kafka.producer({ transactionalId: uniqueName('bench-raw-eos-tx'), idempotent: true, maxInFlightRequests: 1 });
  const states = new Map<string, Totals>();
  const firstBatch = new FirstBatch();
  let outputs = 0;
  consumer.on(consumer.events.CRASH, (e) => {
    failed = e.payload.error;
  });
  try {
    if (options.outputTopic) {
      const admin = kafka.admin();
      await admin.connect();
      try {
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic: options.outputTopic, numPartitions: options.outputPartitions, replicationFactor: 1 }] });
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
    await producer.connect();
    await consumer.connect();
    await consumer.subscribe({ topic: options.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        firstBatch.mark();
        const messages: Array<{ key: string; value: string; headers?: Record<string, string> }> = [];
        const prefix = `${batch.topic}/${batch.partition}/`;
        for (const message of batch.messages) {
          const { key, value, next } = foldTotals(states, message);
          if (!options.outputTopic) continue;
          const out = JSON.stringify({ key, n: value.n, count: next.count, total: next.total });
          messages.push(SOURCE_HEADER ? { key, value: out, headers: { 'kafka-flow-source': `${prefix}${message.offset}/0` } } : { key, value: out });
        }
        const tx = await producer.transaction();
        try {
          // kafkajs puts a send's records for one partition into one record batch, and the broker
          // refuses a batch over max.message.bytes (1 MiB): a fetch's worth of outputs goes in parts.
          for (let from = 0; from < messages.length; from += SEND_CHUNK) {
            await tx.send({ topic: options.outputTopic!, messages: messages.slice(from, from + SEND_CHUNK) });
          }
          await tx.sendOffsets({
            consumerGroupId: groupId,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(BigInt(batch.lastOffset()) + 1n) }] }],
          });
          await tx.commit();
        } catch (err) {
          await tx.abort().catch(() => undefined);
          throw err;
        }
        outputs += messages.length;
        progress.tick(batch.messages.length);
      },
    });
    const { reachedAt } = await reached;
    const { steady, firstBatchAfterMs } = firstBatch.window(start, reachedAt, records);
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      steady,
      details: { first_batch_after_ms: firstBatchAfterMs, keys: states.size, outputs },
    };
  } finally {
    progress.stop();
    failed ??= new Error('stopped');
    await reached.catch(() => undefined);
    await consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await deleteGroups([groupId]);
  }
}
