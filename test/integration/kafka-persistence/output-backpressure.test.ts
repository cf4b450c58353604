// maxPendingOutputs on the real broker: a worker's flow runtime (the real group consumer, real
// transactions with the outputs in them) folding a flow that emits one output per record, with
// outputEvery and persistEvery far off — so only the bound makes its outputs go out while it folds.
// The partition never holds more than the bound plus one slice of a batch (without the bound it
// would hold every output of the run), and the output topic, read read_committed, holds every
// output exactly once. The workflow's part is played by the test: each assignment is recovered
// and folded at once, as the partition workflow's activities would.
import { Registry } from 'prom-client';
import type { RevokeSignal } from '../../../workflows/partition-workflow';
import type { FoldingHandle } from '../../../activities/partition-host';
import type { Owner } from '../../../activities/types';
import { silentLogger } from '../../../core/logger';
import { defineFlow } from '../../../define-flow';
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { FlowMetrics } from '../../../flow/metrics';
import { createBackend } from '../../../persistence/backends';
import { KafkaFlowConsumer } from '../../../workers/runtime/flow-consumer';
import { FlowRuntime } from '../../../workers/runtime/flow-runtime';
import type { PartitionSignals } from '../../../workers/runtime/partition-signals';
import { kafkaScope, requireBroker, unique, waitFor } from '../../support/servers';
import { readCommitted } from './harness';
import { recordPendingOutputs } from '../../support/pending-outputs';
import { driveFolding } from '../../support/fold-loop';

const RECORDS = 20_000;
const KEYS = 50;
const BOUND = 500;
/** workers/runtime/batch-fold.ts folds a batch in slices of this many records, checking the bound before each. */
const SLICE = 2_000;

/** Recovers and folds each assignment at once, as the partition workflow's activities would. */
class ActivitiesInline implements PartitionSignals {
  runtime: FlowRuntime | undefined;
  folding: FoldingHandle | undefined;
  readonly revokes: RevokeSignal[] = [];

  async assigned(input: { flow: string; topic: string; partition: number }, owner: Owner): Promise<void> {
    const request = { flow: input.flow, topic: input.topic, partition: input.partition, owner };
    await this.runtime!.recover(request);
    this.folding = driveFolding(this.runtime!.startFolding(request));
  }

  async revoked(_ref: unknown, signal: RevokeSignal): Promise<void> {
    this.revokes.push(signal);
  }
}

describe('maxPendingOutputs on the real broker (transactional outputs)', () => {
  const kafka = kafkaScope('output-backpressure', { per: 'file' });
  let input: string;
  const output = kafka.topicName('backpressure-outputs');
  const groupId = unique('backpressure-group');
  const name = unique('backpressure');
  kafka.deleteAfter(`${groupId}-${name}-snapshots`);

  beforeAll(async () => {
    input = await kafka.topic('backpressure-input', 1);
    const producer = kafka.client.kafka.producer();
    await producer.connect();
    try {
      for (let from = 0; from < RECORDS; from += 2_000) {
        const messages = Array.from({ length: Math.min(2_000, RECORDS - from) }, (_, i) => ({ key: `k${(from + i) % KEYS}`, value: JSON.stringify({ n: from + i }) }));
        await producer.send({ topic: input, messages });
      }
    } finally {
      await producer.disconnect();
    }
  });

  it('never holds more than the bound plus a slice, and lands every output exactly once', async () => {
    const definition = defineFlow<number, { n: number }>({
      name,
      groupId,
      topics: [input],
      fold: (s, r, ctx) => {
        ctx.emit({ topic: output, key: r.key, value: { n: r.value.n } });
        return (s ?? 0) + 1;
      },
      persistence: { backend: 'kafka', transactional: true },
      outputTopics: [output],
      outputEvery: '10 min',
      maxPendingOutputs: BOUND,
      timers: { persistPeriodically: { fireEvery: '10 min', persistEvery: '10 min' } },
    }) as never;
    const brokers = await requireBroker();
    const metrics = FlowMetrics.of(new Registry());
    const signals = new ActivitiesInline();
    const runtime = new FlowRuntime({
      definition,
      consumer: KafkaFlowConsumer.of(definition, brokers, undefined, silentLogger),
      signals,
      taskQueue: 'not-used',
      backend: createBackend(definition, { brokers, logger: silentLogger }),
      metrics,
      logger: silentLogger,
    });
    signals.runtime = runtime;

    const { held, restore } = recordPendingOutputs();
    let stopped = false;
    try {
      await runtime.start();
      await waitFor('every record folded', () => signals.folding?.poll().progress.position === String(RECORDS), 90_000);
      expect(signals.folding!.poll().failure).toBeUndefined();
      await runtime.stop(); // the flush on leaving lands what is left
      stopped = true;
    } finally {
      restore();
      if (!stopped) await runtime.stop().catch(() => undefined);
    }

    // Without the bound the partition would have held all 20,000 outputs until the flush on leaving.
    expect(Math.max(...held)).toBeGreaterThan(0);
    expect(Math.max(...held)).toBeLessThanOrEqual(BOUND + SLICE);
    const persists = await metrics.registry.getSingleMetricAsString('kafka_flow_persists_total');
    const outputsPersists = Number(/reason="outputs",outcome="ok"\} (\d+)/.exec(persists)?.[1] ?? 0);
    expect(outputsPersists).toBeGreaterThanOrEqual(Math.floor(RECORDS / (BOUND + SLICE)));
    expect(signals.revokes.map((r) => r.reason)).toEqual(['shutdown']);

    const got = await readCommitted(kafka.client, output);
    const seen = new Map<number, number>();
    for (const r of got) {
      expect(r.headers[OUTPUT_SOURCE_HEADER]).toBeDefined();
      const n = (JSON.parse(String(r.value)) as { n: number }).n;
      seen.set(n, (seen.get(n) ?? 0) + 1);
    }
    expect(got).toHaveLength(RECORDS);
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: RECORDS }, (_, i) => i));
    expect([...seen.values()].every((count) => count === 1)).toBe(true);
  });
});
