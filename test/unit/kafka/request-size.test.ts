import { chunkByBytes, recordBytes } from '../../../kafka/request-size';

describe('produce requests under the record-batch limit', () => {
  const msg = (n: number) => ({ key: 'k', value: Buffer.alloc(n) });

  it('splits records in order into chunks no larger than the limit', () => {
    const items = Array.from({ length: 10 }, () => msg(320)); // 353 bytes each: two fit, three do not
    const chunks = chunkByBytes(items, 1000);
    expect(chunks.flat()).toEqual(items);
    for (const c of chunks) expect(c.reduce((n, m) => n + recordBytes(m), 0)).toBeLessThanOrEqual(1000);
    expect(chunks.map((c) => c.length)).toEqual([2, 2, 2, 2, 2]);
  });

  it('sends a record larger than the limit alone, and nothing for nothing', () => {
    expect(chunkByBytes([msg(10), msg(5000), msg(10)], 1000).map((c) => c.length)).toEqual([1, 1, 1]);
    expect(chunkByBytes([], 1000)).toEqual([]);
  });

  it('counts keys, values, tombstones and headers', () => {
    expect(recordBytes({ key: 'abc', value: null })).toBe(32 + 3);
    expect(recordBytes({ key: Buffer.from('ab'), value: 'é', headers: { h: 'v' } })).toBe(32 + 2 + 2 + 8 + 1 + 1);
  });

  it('sizes header keys right when they change from record to record (the last one is remembered)', () => {
    const cases: Array<{ headers: Record<string, string | Buffer>; expected: number }> = [
      { headers: { 'kafka-flow-source': 'in/0/1/0' }, expected: 32 + 1 + 8 + 17 + 8 },
      { headers: { 'kafka-flow-source': 'in/0/2/0' }, expected: 32 + 1 + 8 + 17 + 8 },
      { headers: { 'clé': Buffer.alloc(3), 'kafka-flow-source': 'x' }, expected: 32 + 1 + 8 + 4 + 3 + 8 + 17 + 1 },
      { headers: { 'clé': 'ü' }, expected: 32 + 1 + 8 + 4 + 2 },
    ];
    for (const { headers, expected } of cases) expect(recordBytes({ key: 'k', value: null, headers })).toBe(expected);
  });
});
