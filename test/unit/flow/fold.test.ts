import { andThen, contramapValue, discardingContext, type Fold, filter, handleErrorWith, mapState, transformState } from '../../../flow/fold';
import type { FlowRecord } from '../../../flow/record';

const rec = <V>(value: V, offset = 0): FlowRecord<V> => ({ topic: 't', partition: 0, offset: String(offset), key: 'k', value, timestamp: '0', headers: {} });
const ctx = discardingContext;
const sum: Fold<number, number> = (s, r) => (s ?? 0) + r.value;
const asyncSum: Fold<number, number> = async (s, r) => (s ?? 0) + r.value;

describe('fold helpers (kafka-flow FoldOption)', () => {
  test('filter leaves the state untouched for rejected records, and stays synchronous', () => {
    const f = filter(sum, (_, r) => r.value > 0);
    expect(f(10, rec(-5), ctx)).toBe(10);
    expect(f(10, rec(5), ctx)).toBe(15);
  });

  test('contramapValue adapts the input', () => {
    const f = contramapValue<number, number, string>(sum, (v) => Number(v));
    expect(f(1, rec('41'), ctx)).toBe(42);
  });

  test('transformState wraps the state with metadata (e.g. the offset)', async () => {
    const f = transformState<number, { n: number; at: string }, number>(asyncSum, (o) => o.n, (n, r) => ({ n, at: r.offset }));
    await expect(f({ n: 1, at: '0' }, rec(2, 7), ctx)).resolves.toEqual({ n: 3, at: '7' });
  });

  test('mapState post-processes, undefined stays undefined', () => {
    expect(mapState(sum, (s) => s * 2)(1, rec(1), ctx)).toBe(4);
    expect(mapState<number, number>(() => undefined, (s) => s * 2)(1, rec(1), ctx)).toBeUndefined();
  });

  test('handleErrorWith catches sync throws and async rejections', async () => {
    const boom: Fold<number, number> = () => {
      throw new Error('boom');
    };
    const asyncBoom: Fold<number, number> = async () => {
      throw new Error('boom');
    };
    expect(handleErrorWith(boom, (s) => (s ?? 0) - 1)(5, rec(1), ctx)).toBe(4);
    await expect(handleErrorWith(asyncBoom, (_, e) => (e as Error).message.length)(5, rec(1), ctx)).resolves.toBe(4);
  });

  test('andThen runs the second fold unless the first returned no state', () => {
    const double: Fold<number, number> = (s) => (s ?? 0) * 2;
    expect(andThen(sum, double)(1, rec(2), ctx)).toBe(6);
    expect(andThen<number, number>(() => undefined, double)(1, rec(2), ctx)).toBeUndefined();
  });
});
