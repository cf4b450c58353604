import { Registry } from 'prom-client';
import type { PartitionFigures } from '../../../../workers/runtime/flow-runtime';
import { registerPartitionGauges } from '../../../../workers/observability/partition-gauges';

test('lag, commit lag and partitions by state are read from the runtime at each scrape', async () => {
  const registry = new Registry();
  let figures: PartitionFigures[] | undefined;
  registerPartitionGauges(registry, 'sales', () => figures);

  // Before the runtime exists: no lag series, every state at 0.
  let text = await registry.metrics();
  expect(text).not.toMatch(/^kafka_flow_lag_records\{/m);
  expect(text).toContain('kafka_flow_partitions{flow="sales",state="running"} 0');

  figures = [
    { topic: 'orders', partition: 0, state: 'running', lag: 12, commitLag: 340 },
    { topic: 'orders', partition: 1, state: 'recovering' },
    { topic: 'orders', partition: 2, state: 'running', lag: 0, commitLag: 0 },
  ];
  text = await registry.metrics();
  expect(text).toContain('kafka_flow_lag_records{flow="sales",topic="orders",partition="0"} 12');
  expect(text).toContain('kafka_flow_lag_records{flow="sales",topic="orders",partition="2"} 0');
  expect(text).not.toContain('kafka_flow_lag_records{flow="sales",topic="orders",partition="1"}');
  expect(text).toContain('kafka_flow_commit_lag_records{flow="sales",topic="orders",partition="0"} 340');
  expect(text).toContain('kafka_flow_partitions{flow="sales",state="running"} 2');
  expect(text).toContain('kafka_flow_partitions{flow="sales",state="recovering"} 1');

  // A partition gone (revoked to another process) disappears from the next scrape.
  figures = [figures[0]!];
  text = await registry.metrics();
  expect(text).not.toContain('partition="2"');
  expect(text).toContain('kafka_flow_partitions{flow="sales",state="recovering"} 0');
});
