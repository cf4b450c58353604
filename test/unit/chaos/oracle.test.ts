import { compareOutputs, compareStates, deadLetterSource, describeWrongKey, type InputRecord, outputSource, type ReadOutput, Reference, referenceFold, referenceOutputs } from '../../../chaos/oracle';
import { type ChaosState, chaosOutput, chaosStep, isPoison } from '../../../chaos/flow';

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

describe('chaos outputs', () => {
  test('the fold emits on a deletion of a key that existed and when the new hash is divisible by 4', () => {
    const a = chaosStep(undefined, '0', { op: 'inc' })!;
    expect(chaosOutput(a, undefined, '1')).toEqual({ offset: '1', deleted: true });
    expect(chaosOutput(undefined, undefined, '1')).toBeUndefined(); // a dec on an absent key deletes nothing
    const emitting = { count: 1, counter: 1, hash: 8, last: '2' };
    expect(chaosOutput(undefined, emitting, '2')).toEqual({ offset: '2', count: 1, hash: 8 });
    expect(chaosOutput(undefined, { ...emitting, hash: 9 }, '2')).toBeUndefined();
  });

  // Enough records over a few keys that some emit on their hash and some on deletes.
  const ops: Array<'inc' | 'dec'> = ['inc', 'inc', 'dec', 'inc', 'dec', 'dec', 'inc', 'inc', 'inc', 'dec'];
  const input = Array.from({ length: 60 }, (_, i) => rec(i, `k${i % 3}`, ops[(i * 7) % ops.length]!, 0));
  const expected = referenceOutputs('t', input);
  const asRead = (m: ReadonlyMap<string, string>): ReadOutput[] => [...m].map(([source, value]) => ({ source, value }));

  test('the reference outputs: one per emitting record, keyed by its source', () => {
    expect(expected.size).toBeGreaterThan(3);
    const values = [...expected.values()].map((v) => JSON.parse(v) as { deleted?: true });
    expect(values.some((v) => v.deleted)).toBe(true);
    expect(values.some((v) => !v.deleted)).toBe(true);
    expect([...expected.keys()].every((s) => /^t\/0\/\d+\/0$/.test(s))).toBe(true);
    expect(outputSource('t', { partition: 2, offset: '7' })).toBe('t/2/7/0');
  });

  test('exactly once: the same set passes; a missing, a doubled, an unknown or a changed output each show', () => {
    const exact = asRead(expected);
    expect(compareOutputs(expected, exact, 'exactly-once')).toMatchObject({ wrong: 0, lost: 0, duplicated: 0, redelivered: 0, read: expected.size });
    expect(compareOutputs(expected, exact.slice(1), 'exactly-once')).toMatchObject({ lost: 1, wrong: 0, duplicated: 0 });
    expect(compareOutputs(expected, [...exact, exact[0]!], 'exactly-once')).toMatchObject({ duplicated: 1, wrong: 0, lost: 0 });
    const unknown = compareOutputs(expected, [...exact, { source: 't/0/999/0', value: '{}' }, { value: '{}' }], 'exactly-once');
    expect(unknown).toMatchObject({ wrong: 2, lost: 0 });
    expect(unknown.examples.join('\n')).toContain('no record emits it');
    const changed = [{ source: exact[0]!.source, value: '{"offset":"0","count":99}' }, ...exact.slice(1)];
    expect(compareOutputs(expected, changed, 'exactly-once')).toMatchObject({ wrong: 1, lost: 1 });
  });

  test('at least once: copies are fine when identical (redelivered, not duplicated); a differing copy is wrong, a missing one lost', () => {
    const exact = asRead(expected);
    const twice = [...exact, ...exact.slice(0, 3)];
    expect(compareOutputs(expected, twice, 'at-least-once')).toMatchObject({ wrong: 0, lost: 0, duplicated: 0, redelivered: 3 });
    // The same in an exactly-once mode is three duplicates.
    expect(compareOutputs(expected, twice, 'exactly-once')).toMatchObject({ duplicated: 3, redelivered: 0 });
    const differing = [...exact, { source: exact[0]!.source, value: '{"offset":"0","deleted":true,"extra":1}' }];
    expect(compareOutputs(expected, differing, 'at-least-once')).toMatchObject({ wrong: 1, lost: 0 });
    expect(compareOutputs(expected, exact.slice(2), 'at-least-once')).toMatchObject({ lost: 2 });
  });
});

describe('chaos oracle: poison records and the compact input log', () => {
  const input: InputRecord[] = [
    rec(0, 'a', 'inc'),
    { partition: 0, offset: '1', key: 'a', value: undefined, raw: 'not json 1' },
    { partition: 0, offset: '2', key: 'a', value: { op: 'poison' }, raw: '{"op":"poison"}' },
    rec(3, 'a', 'inc'),
    rec(4, 'b', 'inc', 1),
  ];

  test('a poison record leaves its key as it was, emits nothing, and must be dead-lettered with its value as produced', () => {
    const ref = new Reference('t');
    for (const r of input) ref.add(r);
    expect(ref.states).toEqual(referenceFold(input.filter((r) => !isPoison(r.value))));
    expect(ref.outputs).toEqual(referenceOutputs('t', input.filter((r) => !isPoison(r.value))));
    expect([...ref.deadLetters]).toEqual([
      [deadLetterSource({ partition: 0, offset: '1' }), 'not json 1'],
      [deadLetterSource({ partition: 0, offset: '2' }), '{"op":"poison"}'],
    ]);
    const deadLetters = [...ref.deadLetters].map(([source, value]) => ({ source, value }));
    expect(compareOutputs(ref.deadLetters, deadLetters, 'exactly-once', (v) => v)).toMatchObject({ wrong: 0, lost: 0, duplicated: 0 });
    expect(compareOutputs(ref.deadLetters, deadLetters.slice(1), 'exactly-once', (v) => v)).toMatchObject({ lost: 1 });
  });

  test('the input log: each key\'s partition and last records, in one pass', () => {
    const ref = new Reference('t');
    for (const r of input) ref.add(r);
    expect(ref.log.length).toBe(5);
    expect(ref.log.partitionOf('b')).toBe(1);
    expect(ref.log.partitionOf('zz')).toBeUndefined();
    expect(ref.log.histories(['a', 'b'], 3)).toEqual(
      new Map([
        ['a', ['1:poison', '2:poison', '3:inc']],
        ['b', ['4:inc']],
      ]),
    );
  });

  test('the log grows past its first arrays', () => {
    const ref = new Reference('t');
    for (let i = 0; i < 5000; i++) ref.add(rec(i, `k${i % 7}`, 'inc'));
    expect(ref.log.length).toBe(5000);
    expect(ref.log.histories(['k0'], 2).get('k0')).toEqual(['4991:inc', '4998:inc']);
  });
});
