// A worker's group consumer after an error kafkajs does not retry: with its only broker out of
// reach, kafkajs's coordinator lookup gives up (KafkaJSGroupCoordinatorNotFound, a non-retriable
// error), its consumer disconnects and never starts again on its own — the worker would stay up,
// polling Temporal, folding nothing. Here a flow runtime's consumer reaches the real broker through
// a proxy that drops its connections and cuts its coordinator lookups until that crash happens;
// once they pass again, the records produced meanwhile must be folded (the consumer rejoined, the partition was
// assigned, recovered and folded again). The workflow's part is played by the test, as in
// output-backpressure.test.ts.
import { Registry } from 'prom-client';
import { silentLogger } from '../../../core/logger';
import { defineFlow } from '../../../define-flow';
import { FlowMetrics } from '../../../flow/metrics';
import { createBackend } from '../../../persistence/backends';
import { KafkaFlowConsumer } from '../../../workers/runtime/flow-consumer';
import { FlowRuntime } from '../../../workers/runtime/flow-runtime';
import { ActivitiesInline, type CapturedLine, capturingLogger } from '../../support/inline-activities';
import { KAFKA_API } from '../../../chaos/tcp-proxy';
import { kafkaScope, proxiedClient, requireBroker, send, sleep, unique, waitFor } from '../../support/servers';

describe('the group consumer after an error kafkajs does not retry', () => {
  const kafka = kafkaScope('consumer-crash');

  it('rejoins once the broker is back: records produced meanwhile are folded', async () => {
    const input = await kafka.topic('crash-input', 1);
    const name = unique('crash');
    const groupId = unique('crash-group');
    kafka.deleteAfter(`${groupId}-${name}-snapshots`);
    const definition = defineFlow<number, string>({
      name,
      groupId,
      topics: [input],
      fold: (s) => (s ?? 0) + 1,
      persistence: { backend: 'kafka', transactional: true },
      consumer: { sessionTimeout: 6_000, heartbeatInterval: 500 },
    }) as never;
    const brokers = await requireBroker();
    const proxy = await kafka.proxy();
    const lines: CapturedLine[] = [];
    const signals = new ActivitiesInline();
    const runtime = new FlowRuntime({
      definition,
      consumer: new KafkaFlowConsumer(definition, proxiedClient(kafka.client, proxy), capturingLogger(lines)),
      signals,
      taskQueue: 'not-used',
      backend: createBackend(definition, { brokers, logger: silentLogger }),
      metrics: FlowMetrics.of(new Registry()),
      logger: silentLogger,
    });
    signals.runtime = runtime;
    kafka.defer(() => runtime.stop());
    const position = () => signals.folding?.poll().progress.position;

    await send(kafka.client, input, Array.from({ length: 10 }, (_, i) => ({ key: `k${i % 3}`, value: `${i}` })));
    await runtime.start();
    await waitFor('the first 10 records folded', () => position() === '10', 60_000);

    // The consumer's connections dropped, and each coordinator lookup it makes to rejoin cut
    // before its answer (as while a restarted broker is out of reach): kafkajs gives up on it.
    proxy.cutAfter(process.pid, [KAFKA_API.FIND_COORDINATOR]);
    proxy.setMode('drop');
    await sleep(500);
    proxy.setMode('pass');
    // kafkajs gives up after its retries (≈ 15–30 s idle; on a loaded machine, with two test files at a time, longer).
    await waitFor('the consumer to stop on a non-retriable error', () => lines.some((l) => /rejoining the group/.test(l.message ?? '')), 150_000);
    await send(kafka.client, input, Array.from({ length: 10 }, (_, i) => ({ key: `k${i % 3}`, value: `${10 + i}` })));
    proxy.stopCutAfter(process.pid);

    await waitFor('the records produced during the outage folded', () => position() === '20', 90_000);
    expect(signals.assignments).toBeGreaterThanOrEqual(2);
    expect(signals.folding!.poll().failure).toBeUndefined();
  }, 330_000);
});
