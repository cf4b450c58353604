// The patched version negotiation: with gaps in the implemented versions (TxnOffsetCommit 0, 1, 3;
// OffsetFetch 1-4, 7) kafkajs must pick the highest implemented version inside the broker's range.
import { negotiatedVersion } from './wire';

const negotiated = (apiKey: number, name: string, minVersion: number, maxVersion: number): number =>
  negotiatedVersion({ [apiKey]: { minVersion, maxVersion } }, apiKey, name);

describe('version lookup with gaps', () => {
  it('TxnOffsetCommit: v3 on Kafka 4.3 (0-5), v1 on a broker that stops at 2', () => {
    expect(negotiated(28, 'TxnOffsetCommit', 0, 5)).toBe(3);
    expect(negotiated(28, 'TxnOffsetCommit', 0, 2)).toBe(1);
  });

  it('OffsetFetch: v7 on Kafka 4.3 (1-9), v4 on a broker that stops at 6', () => {
    expect(negotiated(9, 'OffsetFetch', 1, 9)).toBe(7);
    expect(negotiated(9, 'OffsetFetch', 1, 6)).toBe(4);
  });
});
