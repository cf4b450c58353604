// How a kafka flow's definition becomes snapshot backends: names, one backend per input topic,
// and the options defineFlow validates. No broker: nothing connects until a partition is assigned.
import { defineFlow } from '../../../../define-flow';
import { createKafkaClient } from '../../../../kafka/client';
import { KafkaFlowBackend } from '../../../../persistence/kafka/flow-backend';
import { kafkaFlowBackend } from '../../../../persistence/kafka/factory';

const client = createKafkaClient({ brokers: ['127.0.0.1:1'], clientId: 'unit', logLevel: 'nothing' });

describe('a kafka flow\'s snapshot backends', () => {
  it('a single-topic flow: <groupId>-<name>-snapshots, transactional ids <groupId>-<name>-snapshot-<p>', async () => {
    const flow = new KafkaFlowBackend({ client, flowName: 'totals', groupId: 'sales', topics: ['orders'], transactional: true });
    const b = flow.forTopic('orders');
    expect(b).toMatchObject({ snapshotTopic: 'sales-totals-snapshots', transactionalIdPrefix: 'sales-totals', transactional: true, maxWritesPerTransaction: 2048, recoveryStallTimeoutMs: 180_000 });
    expect(() => flow.forTopic('other')).toThrow(/not an input topic/);
    await flow.close();
  });

  it('a multi-topic flow gets a snapshot topic and an id prefix per input topic, and cannot share one', async () => {
    const flow = new KafkaFlowBackend({ client, flowName: 'totals', groupId: 'sales', topics: ['orders', 'refunds'] });
    expect([...flow.backends.values()].map((b) => [b.snapshotTopic, b.transactionalIdPrefix])).toEqual([
      ['sales-totals-orders-snapshots', 'sales-totals-orders'],
      ['sales-totals-refunds-snapshots', 'sales-totals-refunds'],
    ]);
    await flow.close();
    expect(() => new KafkaFlowBackend({ client, flowName: 't', groupId: 'g', topics: ['a', 'b'], snapshotTopic: 'shared' })).toThrow(/cannot be set/);
  });

  it('takes its options from defineFlow', async () => {
    const definition = defineFlow({
      name: 'totals',
      groupId: 'sales',
      topics: ['orders'],
      fold: (s: number | undefined) => (s ?? 0) + 1,
      persistence: { backend: 'kafka', transactional: true, maxWritesPerTransaction: 64, recoveryStallTimeout: '30s', snapshotTopic: 'totals-state', transactionalIdPrefix: 'sales-totals-v2', replicationFactor: 3 },
    });
    const flow = kafkaFlowBackend(definition, { brokers: ['127.0.0.1:1'] });
    expect(flow.forTopic('orders')).toMatchObject({ snapshotTopic: 'totals-state', transactionalIdPrefix: 'sales-totals-v2', maxWritesPerTransaction: 64, recoveryStallTimeoutMs: 30_000 });
    await flow.close();
    expect(() =>
      defineFlow({ name: 'x', groupId: 'g', topics: ['t'], fold: () => 1, persistence: { backend: 'kafka', transactionalIdPrefix: '' } }),
    ).toThrow(/transactionalIdPrefix/);
  });

  it('is transactional (fenced) unless the caching mode is asked for', async () => {
    const flowOf = (persistence: { backend: 'kafka'; transactional?: boolean }) =>
      kafkaFlowBackend(defineFlow({ name: 'totals', groupId: 'sales', topics: ['orders'], fold: (s: number | undefined) => (s ?? 0) + 1, persistence }), { brokers: ['127.0.0.1:1'] });
    const plain = flowOf({ backend: 'kafka' });
    const caching = flowOf({ backend: 'kafka', transactional: false });
    expect(plain.forTopic('orders').transactional).toBe(true);
    expect(caching.forTopic('orders').transactional).toBe(false);
    await plain.close();
    await caching.close();
    // Local state in caching mode too: its checkpoint holds whenever another writer's records come between ours.
    const cachingLocal = defineFlow({ name: 'x', groupId: 'g', topics: ['t'], fold: () => 1, persistence: { backend: 'kafka', transactional: false, localState: { dir: '/tmp/x' } } });
    expect(cachingLocal.persistence).toMatchObject({ transactional: false, localState: { dir: '/tmp/x' } });
  });
});
