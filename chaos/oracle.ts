import { type ChaosState, type ChaosValue, chaosStep } from '../test/fixtures/chaos-flow';

/**
 * The oracle: a plain fold of the input topic as committed (read after the run), per key, with
 * the flow's own step function; and the comparison of the persisted state (inspect) against it.
 */
export interface InputRecord {
  partition: number;
  offset: string;
  key: string;
  value: ChaosValue;
}

/** Records must come in offset order within each partition (a key lives in one partition). */
export function referenceFold(records: Iterable<InputRecord>): Map<string, ChaosState> {
  const state = new Map<string, ChaosState>();
  for (const r of records) {
    const next = chaosStep(state.get(r.key), r.offset, r.value);
    if (next === undefined) state.delete(r.key);
    else state.set(r.key, next);
  }
  return state;
}

export interface WrongKey {
  key: string;
  expected?: ChaosState;
  actual?: ChaosState;
}

export interface Verdict {
  keysExpected: number;
  keysActual: number;
  wrongKeys: WrongKey[];
  /** Per key, records short of the reference count (summed). */
  lostRecords: number;
  /** Per key, records beyond the reference count (summed). */
  duplicatedRecords: number;
}

const same = (a: ChaosState, b: ChaosState) => a.count === b.count && a.counter === b.counter && a.hash === b.hash && a.last === b.last;

export function compareStates(expected: ReadonlyMap<string, ChaosState>, actual: ReadonlyMap<string, ChaosState>): Verdict {
  const wrongKeys: WrongKey[] = [];
  let lostRecords = 0;
  let duplicatedRecords = 0;
  const keys = new Set([...expected.keys(), ...actual.keys()]);
  for (const key of [...keys].sort()) {
    const want = expected.get(key);
    const got = actual.get(key);
    if (want && got && same(want, got)) continue;
    wrongKeys.push({ key, expected: want, actual: got });
    const diff = (got?.count ?? 0) - (want?.count ?? 0);
    if (diff > 0) duplicatedRecords += diff;
    else lostRecords -= diff;
  }
  return { keysExpected: expected.size, keysActual: actual.size, wrongKeys, lostRecords, duplicatedRecords };
}

/** One line per wrong key, for the failure print. */
export function describeWrongKey(w: WrongKey): string {
  const f = (s?: ChaosState) => (s ? `count=${s.count} counter=${s.counter} hash=${s.hash} last=${s.last}` : '(absent)');
  return `${w.key}: expected ${f(w.expected)}; actual ${f(w.actual)}`;
}
