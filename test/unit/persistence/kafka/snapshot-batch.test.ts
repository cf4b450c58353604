// prepareBatch (pure): a key's outputs ride with its snapshot record, however many it holds; each
// write's stored size is reported (a byte-bounded state cache counts keys by it).
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

  it('reports each write\'s stored size: the record as written for a put or a delete marker, 0 for a purge', () => {
    const format = snapshotFormat<{ s: string }>();
    const batch = prepareBatch<{ s: string }, unknown>(
      [{ key: 'put', snapshot: { state: { s: 'x'.repeat(1_000) }, offset: 1 } }, { key: 'purged', purge: { offset: 2 } }, { key: 'deleted', delete: { offset: 3 } }],
      { snapshotTopic: 'snapshots', partition: 0, format },
    );
    expect(batch.sizes).toEqual([batch.messages[0]!.value!.length, 0, batch.messages[2]!.value!.length]);
    expect(batch.sizes[0]).toBeGreaterThan(1_000);
  });
});
