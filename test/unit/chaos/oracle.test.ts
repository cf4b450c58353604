import { compareStates, describeWrongKey, type InputRecord, referenceFold } from '../../../chaos/oracle';
import { type ChaosState, chaosStep } from '../../fixtures/chaos-flow';

const rec = (offset: number, key: string, op: 'inc' | 'dec', partition = 0): InputRecord => ({ partition, offset: String(offset), key, value: { op } });

/** The fold a worker would persist, given the records it applied (in order). */
const apply = (records: InputRecord[]) => referenceFold(records);

describe('chaos flow step', () => {
  test('counts, chains the hash over (offset, op), and deletes at counter 0', () => {
    const a = chaosStep(undefined, '0', { op: 'inc' })!;
    expect(a).toMatchObject({ count: 1, counter: 1, last: '0' });
    const b = chaosStep(a, '1', { op: 'inc' })!;
    expect(b).toMatchObject({ count: 2, counter: 2, last: '1' });
    const c = chaosStep(b, '2', { op: 'dec' })!;
    expect(c).toMatchObject({ count: 3, counter: 1 });
    expect(chaosStep(c, '3', { op: 'dec' })).toBeUndefined();
    expect(chaosStep(undefined, '4', { op: 'dec' })).toBeUndefined();
    // the op is in the hash: same offsets, different ops, different hash
    expect(chaosStep(a, '1', { op: 'dec' })).toBeUndefined();
    const two = chaosStep(chaosStep(a, '1', { op: 'inc' }), '2', { op: 'inc' })!;
    expect(two.hash).not.toBe(c.hash);
  });
});

describe('chaos oracle', () => {
  const input = [rec(0, 'a', 'inc'), rec(1, 'b', 'inc'), rec(2, 'a', 'inc'), rec(3, 'a', 'dec'), rec(4, 'b', 'dec'), rec(5, 'a', 'inc'), rec(6, 'c', 'inc')];

  test('reference fold: deleted keys are absent, the others hold their chain', () => {
    const ref = referenceFold(input);
    expect([...ref.keys()].sort()).toEqual(['a', 'c']);
    expect(ref.get('a')).toMatchObject({ count: 4, counter: 2, last: '5' });
  });

  test('an exact copy passes', () => {
    const v = compareStates(referenceFold(input), apply(input));
    expect(v.wrongKeys).toEqual([]);
    expect(v.lostRecords + v.duplicatedRecords).toBe(0);
  });

  test('a lost record shows (count short), a duplicated one too (count beyond)', () => {
    const lost = compareStates(referenceFold(input), apply(input.filter((r) => r.offset !== '2')));
    expect(lost.wrongKeys.map((w) => w.key)).toContain('a');
    expect(lost.lostRecords).toBeGreaterThan(0);
    const dup = compareStates(referenceFold(input), apply([...input.slice(0, 3), input[2]!, ...input.slice(3)]));
    expect(dup.wrongKeys.map((w) => w.key)).toContain('a');
    expect(dup.duplicatedRecords).toBeGreaterThan(0);
  });

  test('reordered records show even when the count is right', () => {
    const swapped = [input[0]!, input[1]!, input[5]!, input[3]!, input[4]!, input[2]!, input[6]!];
    const v = compareStates(referenceFold(input), apply(swapped));
    expect(v.wrongKeys.map((w) => w.key)).toContain('a');
  });

  test('a delete replayed onto a newer state (stale restart) shows: a key resurrected or missing', () => {
    // b was deleted at offset 4; a replay from offset 1 that re-applies b's records is the same,
    // but a state that kept b (delete lost) is wrong
    const kept = new Map<string, ChaosState>(referenceFold(input));
    kept.set('b', referenceFold(input.slice(0, 2)).get('b')!);
    const v = compareStates(referenceFold(input), kept);
    expect(v.wrongKeys).toEqual([{ key: 'b', expected: undefined, actual: kept.get('b') }]);
    expect(v.duplicatedRecords).toBe(1);
    expect(describeWrongKey(v.wrongKeys[0]!)).toContain('expected (absent)');
    const missing = new Map(referenceFold(input));
    missing.delete('c');
    expect(compareStates(referenceFold(input), missing).lostRecords).toBe(1);
  });
});
