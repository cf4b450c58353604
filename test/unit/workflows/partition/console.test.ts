import { coarse, ownerProcess } from '../../../../workflows/partition/console';

test('coarse: exact below 100, two significant digits above, so small changes of a large count show no change', () => {
  expect([0, 7, 99].map(coarse)).toEqual([0, 7, 99]);
  expect([100, 104, 105, 1234, 1249, 98_765, 1_000_000].map(coarse)).toEqual([100, 100, 110, 1200, 1200, 99_000, 1_000_000]);
  expect(coarse(1234)).toBe(coarse(1201));
});

test("ownerProcess: the owner's host and process of its task queue, as `status` shows it", () => {
  expect(ownerProcess({ generation: 3, memberId: 'm', taskQueue: 'kafka-flow-temporal/sales/host-1/123-ab12cd34' })).toBe('host-1/123-ab12cd34');
});
