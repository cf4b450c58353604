import { type ChaosState, type ChaosValue, chaosOutput, chaosStep } from '../test/fixtures/chaos-flow';

/**
 * The oracle: a plain fold of the input topic as committed (read after the run), per key, with
 * the flow's own step function; the comparison of the persisted state (inspect) against it; and
 * the outputs the fold must have emitted against what the output topic holds.
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

/** An output as read back from the output topic (read_committed). */
export interface ReadOutput {
  /** The `kafka-flow-source` header (`<topic>/<partition>/<offset>/<index>`), if the record had one. */
  source?: string;
  value: string;
}

/** `<topic>/<partition>/<offset>/0`: the source of the (only) output a chaos record emits. */
export const outputSource = (topic: string, r: Pick<InputRecord, 'partition' | 'offset'>) => `${topic}/${r.partition}/${r.offset}/0`;

/**
 * Every output the fold must have emitted over the input (in offset order per partition), by
 * source, as canonical JSON.
 */
export function referenceOutputs(topic: string, records: Iterable<InputRecord>): Map<string, string> {
  const state = new Map<string, ChaosState>();
  const outputs = new Map<string, string>();
  for (const r of records) {
    const before = state.get(r.key);
    const next = chaosStep(before, r.offset, r.value);
    if (next === undefined) state.delete(r.key);
    else state.set(r.key, next);
    const output = chaosOutput(before, next, r.offset);
    if (output) outputs.set(outputSource(topic, r), JSON.stringify(output));
  }
  return outputs;
}

export type Delivery = 'exactly-once' | 'at-least-once';

export interface OutputVerdict {
  delivery: Delivery;
  expected: number;
  read: number;
  /** Outputs that should not exist: no source header, a source no record emits, or another value. */
  wrong: number;
  /** Expected outputs not found. */
  lost: number;
  /** Copies beyond the first of an output: for exactly-once delivery; 0 after deduplication for at-least-once. */
  duplicated: number;
  /** At-least-once: copies beyond the first (what deduplication by source removed). */
  redelivered: number;
  /** A few of the wrong, lost and duplicated, for the report. */
  examples: string[];
}

const canonical = (json: string): string | undefined => {
  try {
    return JSON.stringify(JSON.parse(json));
  } catch {
    return undefined;
  }
};

/**
 * Compares what the output topic holds with the reference outputs. Exactly-once: each expected
 * output once, nothing else. At-least-once: each expected output at least once, every copy the
 * same, nothing else — so after deduplication by source, exactly once.
 */
export function compareOutputs(expected: ReadonlyMap<string, string>, actual: readonly ReadOutput[], delivery: Delivery): OutputVerdict {
  const seen = new Map<string, number>();
  const examples: string[] = [];
  const example = (line: string) => {
    if (examples.length < 10) examples.push(line);
  };
  let wrong = 0;
  for (const o of actual) {
    const want = o.source === undefined ? undefined : expected.get(o.source);
    if (want === undefined || canonical(o.value) !== want) {
      wrong++;
      example(`wrong: ${o.source ?? '(no source header)'} = ${o.value}${want === undefined ? ' (no record emits it)' : `, expected ${want}`}`);
      continue;
    }
    seen.set(o.source!, (seen.get(o.source!) ?? 0) + 1);
  }
  let lost = 0;
  let extra = 0;
  for (const [source, value] of expected) {
    const n = seen.get(source) ?? 0;
    if (n === 0) {
      lost++;
      example(`lost: ${source} = ${value}`);
    } else if (n > 1) {
      extra += n - 1;
      if (delivery === 'exactly-once') example(`duplicated: ${source} × ${n}`);
    }
  }
  return {
    delivery,
    expected: expected.size,
    read: actual.length,
    wrong,
    lost,
    duplicated: delivery === 'exactly-once' ? extra : 0,
    redelivered: delivery === 'at-least-once' ? extra : 0,
    examples,
  };
}
