// prepareBatch (pure): a key's outputs ride with its snapshot record, however many it holds.
import type { OutputRecord } from '../../../../core/persistence-types';
import { prepareBatch } from '../../../../persistence/kafka/snapshot-batch';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';

describe('prepareBatch', () => {
  it("keeps every output of a key holding more than a call takes arguments (a high maxPendingOutputs), in order", () => {
    const n = 300_000;
    const many: OutputRecord[] = Array.from({ length: n }, (_, i) => ({ kind: 'emitted', topic: 'out', key: 'k', value: Buffer.from(String(i)), headers: {} }) as OutputRecord);
    const batch = prepareBatch([{ key: 'k', snapshot: { state: { n }, offset: 7 }, outputs: many }, { key: 'j', snapshot: { state: { n: 1 }, offset: 8 } }], {
      snapshotTopic: 'snapshots',
      partition: 0,
      format: snapshotFormat<{ n: number }>(),
    });
    expect(batch.outputs).toHaveLength(n);
    expect(String((batch.outputs[0] as OutputRecord).value)).toBe('0');
    expect(String((batch.outputs[n - 1] as OutputRecord).value)).toBe(String(n - 1));
    expect(batch.messages.map((m) => m.key)).toEqual(['k', 'j']);
    expect(batch.puts).toBe(2);
  });
});
