// An input offset the broker no longer (or never) holds, on the real broker. kafkajs's answer to a
// fetch out of range is to commit the consumer's default offset to the group itself — outside the
// partition's fenced commit, and `-2` ("earliest") where a transactional flow keeps the offset that
// belongs with its snapshots, which the next owner's recovery then cannot use. Here the flow decides
// instead and commits nothing of its own accord:
// - records the topic's retention deleted before they were folded (the committed offset below the
//   log start) are skipped, counted and logged as an error, and folding goes on from the log start;
// - a committed offset past the log end (a topic recreated, a log truncated) stops the partition
//   with InputOffsetOutOfRangeError, the committed offset left as it is.
// The workflow's part is played by the test, as in consumer-crash.test.ts.
import type { Admin } from 'kafkajs';
import { Registry } from 'prom-client';
import { silentLogger } from '../../../core/logger';
import { defineFlow } from '../../../define-flow';
import { FlowMetrics } from '../../../flow/metrics';
import { InputOffsetOutOfRangeError } from '../../../index';
import { createBackend } from '../../../persistence/backends';
import { KafkaFlowConsumer } from '../../../workers/runtime/flow-consumer';
import { FlowRuntime } from '../../../workers/runtime/flow-runtime';
import { ActivitiesInline, type CapturedLine, capturingLogger } from '../../support/inline-activities';
import { kafkaScope, requireBroker, send, sleep, unique, waitFor } from '../../support/servers';

describe('an input offset out of the partition\'s range', () => {
  const kafka = kafkaScope('input-offset-range');
  // kafkajs's own admin, for what the project's KafkaAdmin does not do (deleteRecords, setOffsets, fetchOffsets).
  let admin: Admin | undefined;
  const raw = () => admin!;
  beforeEach(async () => {
    admin = kafka.client.kafka.admin();
    await admin.connect();
    const a = admin;
    kafka.defer(() => a.disconnect());
  });

  async function runtimeFor(input: string, name: string, groupId: string) {
    const definition = defineFlow<number, string>({
      name,
      groupId,
      topics: [input],
      fold: (s) => (s ?? 0) + 1,
      persistence: { backend: 'kafka', transactional: true },
      consumer: { sessionTimeout: 6_000, heartbeatInterval: 500 },
    }) as never;
    const brokers = await requireBroker();
    const lines: CapturedLine[] = [];
    const registry = new Registry();
    const signals = new ActivitiesInline();
    const runtime = new FlowRuntime({
      definition,
      consumer: new KafkaFlowConsumer(definition, kafka.client, capturingLogger(lines)),
      signals,
      taskQueue: 'not-used',
      backend: createBackend(definition, { brokers, logger: silentLogger }),
      metrics: FlowMetrics.of(registry),
      logger: capturingLogger(lines),
    });
    signals.runtime = runtime;
    kafka.defer(() => runtime.stop());
    const counter = async (metric: string) => {
      const values = (await registry.getSingleMetric(metric)?.get())?.values ?? [];
      return values.reduce((n, v) => n + v.value, 0);
    };
    return { runtime, signals, lines, counter, position: () => signals.poll()?.progress.position };
  }

  /** The group's committed offsets of partition 0, read every 25 ms until `stop` (every value seen). */
  function watchCommitted(groupId: string, topic: string) {
    const seen = new Set<string>();
    let stopped = false;
    const done = (async () => {
      while (!stopped) {
        const [t] = await raw().fetchOffsets({ groupId, topics: [topic] });
        const o = t?.partitions.find((p) => p.partition === 0)?.offset;
        if (o !== undefined) seen.add(o);
        await sleep(25);
      }
    })();
    return {
      seen,
      stop: async () => {
        stopped = true;
        await done;
      },
    };
  }

  const committed = async (groupId: string, topic: string) =>
    (await raw().fetchOffsets({ groupId, topics: [topic] }))[0]?.partitions.find((p) => p.partition === 0)?.offset;

  it('records deleted by retention before they were folded: skipped, counted and logged; folding goes on from the log start and nothing commits outside the fence', async () => {
    const input = await kafka.topic('range-deleted', 1);
    const name = unique('range-deleted');
    const groupId = unique('range-deleted-group');
    kafka.deleteAfter(`${groupId}-${name}-snapshots`);
    const batch = (from: number) => Array.from({ length: 10 }, (_, i) => ({ key: `k${(from + i) % 3}`, value: `${from + i}` }));

    await send(kafka.client, input, batch(0));
    const first = await runtimeFor(input, name, groupId);
    await first.runtime.start();
    await waitFor('the first 10 records folded and committed', async () => first.position() === '10' && (await committed(groupId, input)) === '10', 60_000);
    await first.runtime.stop();

    // Ten more, of which the first five go (as retention deletes a segment) before anyone folds them.
    await send(kafka.client, input, batch(10));
    await raw().deleteTopicRecords({ topic: input, partitions: [{ partition: 0, offset: '15' }] });

    const watch = watchCommitted(groupId, input);
    const second = await runtimeFor(input, name, groupId);
    try {
      await second.runtime.start();
      await waitFor('records 15..19 folded and committed', async () => second.position() === '20' && (await committed(groupId, input)) === '20', 60_000);
    } finally {
      await watch.stop();
    }
    expect(second.signals.failure).toBeUndefined();
    expect(await second.counter('kafka_flow_records_folded_total')).toBe(5);
    expect(await second.counter('kafka_flow_input_records_deleted_unfolded_total')).toBe(5);
    const logged = second.lines.find((l) => l.level === 'error' && /deleted by the topic's retention/.test(l.message ?? ''));
    expect(logged?.fields).toMatchObject({ topic: input, partition: 0, from: 10, to: 15, records: 5 });
    // Only offsets the flow committed: never kafkajs's "earliest" (-2) or "latest" (-1).
    expect([...watch.seen].every((o) => Number(o) >= 10)).toBe(true);
  }, 180_000);

  it('a committed offset past the log end: the partition stops with InputOffsetOutOfRangeError and the offset stays as it was', async () => {
    const input = await kafka.topic('range-past-end', 1);
    const name = unique('range-past-end');
    const groupId = unique('range-past-end-group');
    kafka.deleteAfter(`${groupId}-${name}-snapshots`);
    await send(kafka.client, input, Array.from({ length: 10 }, (_, i) => ({ key: `k${i % 3}`, value: `${i}` })));
    // As if the topic had been recreated under the group: its committed offset is past the new log.
    await raw().setOffsets({ groupId, topic: input, partitions: [{ partition: 0, offset: '100' }] });

    const { runtime, signals, counter } = await runtimeFor(input, name, groupId);
    await runtime.start();
    await waitFor('the partition stopped on the out-of-range offset', () => signals.poll()?.failure !== undefined || signals.failure !== undefined, 60_000);
    expect(signals.failure).toBeInstanceOf(InputOffsetOutOfRangeError);
    expect(signals.failure).toMatchObject({ code: 'INPUT_OFFSET_OUT_OF_RANGE', topic: input, partition: 0, offset: 100, logStart: 0, logEnd: 10 });
    await sleep(1_000);
    expect(await committed(groupId, input)).toBe('100');
    expect(await counter('kafka_flow_records_folded_total')).toBe(0);
  }, 120_000);
});
