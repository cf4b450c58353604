import type { PartitionStatus } from '../../../../workflows/partition-workflow';
import { formatStatus } from '../../../../workers/cli/flow-status';

const status = (over: Partial<PartitionStatus>): PartitionStatus => ({
  flow: 'sales',
  topic: 'orders',
  partition: 0,
  phase: 'running',
  ownerHistory: [],
  counters: { persists: 0, fences: 0, recoveries: 0, ownerLosses: 0, persistFailures: 0, runs: 1 },
  persistEveryMs: 1000,
  ...over,
});

test("status: a recovering partition shows the share its owner last reported; a row from search attributes says so", () => {
  const owner = { generation: 4, memberId: 'm', taskQueue: 'kafka-flow-temporal/sales/host-1/77-abc' };
  const table = formatStatus([
    status({ partition: 0, phase: 'recovering', owner, restoring: { generation: 4, memberId: 'm', read: 4200, unit: 'snapshot records', fraction: 0.427, at: 0 } }),
    status({ partition: 1, phase: 'recovering', owner }),
    status({ partition: 2, phase: 'running', owner, committedOffset: '12', lag: 0, liveKeys: 3 }),
    { source: 'search-attributes', workflowId: 'w', flow: 'sales', topic: 'orders', partition: 3, phase: 'idle', queryError: 'no worker' },
  ]);
  const rows = table.split('\n').map((l) => l.split(/ {2,}/));
  expect(rows[0]).toEqual(['topic', 'partition', 'phase', 'generation', 'owner', 'committed', 'lag', 'keys', 'last persist', 'fences', 'outputs', 'from']);
  expect(rows[1]!.slice(0, 5)).toEqual(['orders', '0', 'recovering 42 %', '4', 'host-1/77-abc']);
  expect(rows[2]!.slice(0, 3)).toEqual(['orders', '1', 'recovering']);
  expect(rows[3]!.slice(0, 8)).toEqual(['orders', '2', 'running', '4', 'host-1/77-abc', '12', '0', '3']);
  expect(rows[4]!.at(-1)).toBe('search attributes');
});

test('status: a partition with standby copies shows each worker and its lag; the column appears only when some worker reports one', () => {
  const owner = { generation: 2, memberId: 'm', taskQueue: 'kafka-flow-temporal/sales/host-1/77-abc' };
  const plain = formatStatus([status({ partition: 0, owner })]);
  expect(plain.split('\n')[0]).not.toMatch(/standby/);
  const table = formatStatus([
    { ...status({ partition: 0, owner }), source: 'query', standbys: [{ worker: 'kafka-flow-temporal/sales/host-2/88-def', lag: 12, checkpoint: '340' }] },
    { ...status({ partition: 1, owner }), source: 'query' },
    { source: 'search-attributes', workflowId: 'w', flow: 'sales', topic: 'orders', partition: 2, phase: 'idle', queryError: 'no worker' },
  ]);
  const rows = table.split('\n').map((l) => l.split(/ {2,}/));
  expect(rows[0]!.slice(-2)).toEqual(['standby', 'from']);
  expect(rows[1]!.slice(-2)).toEqual(['host-2/88-def lag 12', 'query']);
  expect(rows[2]!.slice(-2)).toEqual(['-', 'query']);
  expect(rows[3]!.slice(-2)).toEqual(['-', 'search attributes']);
});
