import { ConfigError } from '../../../../config/errors';
import { checkLayout } from '../../../../persistence/cassandra/options';
import {
  FENCE_TIMESTAMP_BASE,
  FenceSequences,
  FenceTimestampRangeError,
  fenceTimestamp,
  isFenceTimestamp,
  MAX_FENCED_GENERATION,
} from '../../../../persistence/cassandra/write-timestamp';

describe("fencing 'timestamp': the order of write timestamps", () => {
  test('a newer generation is above every batch of an older one; within one, a later batch is above an earlier one', () => {
    expect(fenceTimestamp(0, 2, 0)).toBeGreaterThan(fenceTimestamp(0, 1, 2 ** 32 - 1));
    expect(fenceTimestamp(0, 1, 1)).toBeGreaterThan(fenceTimestamp(0, 1, 0));
    // A raised epoch (the group recreated: generations start over at 1) is above the old epoch's last.
    expect(fenceTimestamp(1, 1, 0)).toBeGreaterThan(fenceTimestamp(0, MAX_FENCED_GENERATION, 2 ** 32 - 1));
  });

  test('every timestamp is above any clock in microseconds, and fits a signed 64-bit cell', () => {
    const year3000 = BigInt(Date.UTC(3000, 0, 1)) * 1000n;
    expect(fenceTimestamp(0, 0, 0)).toBe(FENCE_TIMESTAMP_BASE);
    expect(FENCE_TIMESTAMP_BASE).toBeGreaterThan(year3000);
    expect(fenceTimestamp(15, MAX_FENCED_GENERATION, 2 ** 32 - 1)).toBeLessThanOrEqual(2n ** 63n - 1n);
    expect(isFenceTimestamp(fenceTimestamp(0, 1, 0))).toBe(true);
    expect(isFenceTimestamp(BigInt(Date.now()) * 1000n)).toBe(false);
    expect(isFenceTimestamp(null)).toBe(false);
  });

  test.each([
    [16, 1, 0, /fenceEpoch 16/],
    [0, MAX_FENCED_GENERATION + 1, 0, /generation 67108864 is past 67108863.*fenceEpoch/],
    [0, 1, 2 ** 32, /restart the worker/],
    [0, -1, 0, /generation -1/],
  ])('epoch %d, generation %d, batch %d is out of the order: a typed error that says what to do', (epoch, generation, sequence, message) => {
    expect(() => fenceTimestamp(epoch, generation, sequence)).toThrow(FenceTimestampRangeError);
    expect(() => fenceTimestamp(epoch, generation, sequence)).toThrow(message);
  });

  test("batch sequences go on per partition within a generation (a recovery in the same generation continues), and start over with a newer one", () => {
    const s = new FenceSequences();
    expect([s.take('t/0', 3), s.take('t/0', 3), s.take('t/1', 3), s.take('t/0', 3)]).toEqual([0, 1, 0, 2]);
    expect(s.take('t/0', 4)).toBe(0);
    expect(s.take('t/0', 4)).toBe(1);
  });

  test("it guards snapshot writes only: journal modes are refused with a ConfigError", () => {
    expect(() => checkLayout({ fencing: 'timestamp' }, 'snapshots')).not.toThrow();
    for (const mode of ['journal', 'journal+snapshots'] as const) {
      expect(() => checkLayout({ fencing: 'timestamp' }, mode)).toThrow(ConfigError);
      expect(() => checkLayout({ fencing: 'timestamp' }, mode)).toThrow(/guards snapshot writes only/);
    }
  });
});
