import { CHAOS_TTL_MS, type ChaosState, type ChaosValue, chaosFire, chaosFireOutput, chaosOutput, chaosStep, isPoison, opCode, PULSE, PULSE_MS, pulses } from './flow';

/**
 * The oracle: a plain fold of the input topic as committed (read after the run), per key, with
 * the flow's own step function; the comparison of the persisted state (inspect) against it; and
 * the outputs and dead letters the fold must have emitted against what their topics hold. It
 * streams: a run of millions of records keeps the keys' states, the expected outputs (a string
 * each) and a compact log of the input (a few bytes a record, for the wrong keys' histories), not
 * an object per record.
 */
export interface InputRecord {
  partition: number;
  offset: string;
  key: string;
  /** Undefined: the value is not JSON (a poison record, dead-lettered on decode). */
  value: ChaosValue | undefined;
  /** The value as produced (needed for poison records: their dead letter carries it as is). */
  raw?: string;
  /** The record's timestamp (ms, as Kafka gives it); event time. Default 0. */
  timestamp?: string;
}

/** The engine's name of the stateTtl timer. */
const TTL = 'kafka-flow:ttl';

/** A timer entry: [at, key, name]. */
type Entry = [number, string, string];
const earlier = (a: Entry, b: Entry) => (a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2]);

/** A plain min-heap of timer entries (the oracle's own, not the engine's). */
class EntryHeap {
  private readonly h: Entry[] = [];
  push(e: Entry): void {
    const h = this.h;
    h.push(e);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!earlier(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }
  peek(): Entry | undefined {
    return this.h[0];
  }
  pop(): void {
    const h = this.h;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      let m = i;
      if (l < h.length && earlier(h[l]!, h[m]!)) m = l;
      if (l + 1 < h.length && earlier(h[l + 1]!, h[m]!)) m = l + 1;
      if (m === i) return;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}

/** `<topic>/<partition>/timer:<key>:<name>:<at>/0`: the source of the output a key timer's fire emits. */
export const fireSource = (topic: string, partition: number, key: string, name: string, at: number) =>
  `${topic}/${partition}/timer:${encodeURIComponent(key)}:${encodeURIComponent(name)}:${at}/0`;

/** The input, a few bytes a record: each record's key (as an index), partition, offset and op. */
export class InputLog {
  private readonly keyIds = new Map<string, number>();
  private readonly keyNames: string[] = [];
  private readonly keyPartition: number[] = [];
  private key = new Int32Array(1024);
  private offset = new Float64Array(1024);
  /** 0 poison, 1 inc, 2 dec. */
  private op = new Uint8Array(1024);
  length = 0;

  add(r: InputRecord): void {
    let id = this.keyIds.get(r.key);
    if (id === undefined) {
      id = this.keyNames.length;
      this.keyIds.set(r.key, id);
      this.keyNames.push(r.key);
    }
    this.keyPartition[id] = r.partition;
    if (this.length === this.key.length) {
      const grow = <T extends Int32Array | Float64Array | Uint8Array>(a: T, make: (n: number) => T): T => {
        const b = make(a.length * 2);
        b.set(a);
        return b;
      };
      this.key = grow(this.key, (n) => new Int32Array(n));
      this.offset = grow(this.offset, (n) => new Float64Array(n));
      this.op = grow(this.op, (n) => new Uint8Array(n));
    }
    this.key[this.length] = id;
    this.offset[this.length] = Number(r.offset);
    this.op[this.length] = isPoison(r.value) ? 0 : opCode(r.value?.op);
    this.length++;
  }

  partitionOf(key: string): number | undefined {
    const id = this.keyIds.get(key);
    return id === undefined ? undefined : this.keyPartition[id];
  }

  /** The last `n` records of each of `keys` as `offset:op`, in one pass over the log. */
  histories(keys: Iterable<string>, n = 6): Map<string, string[]> {
    const wanted = new Map<number, string[]>();
    for (const k of keys) {
      const id = this.keyIds.get(k);
      if (id !== undefined) wanted.set(id, []);
    }
    for (let i = 0; i < this.length; i++) {
      const h = wanted.get(this.key[i]!);
      if (!h) continue;
      h.push(`${this.offset[i]}:${['poison', 'inc', 'dec'][this.op[i]!]}`);
      if (h.length > n) h.shift();
    }
    return new Map([...wanted].map(([id, h]) => [this.keyNames[id]!, h]));
  }
}

/** The reference, fed one record at a time in offset order within each partition (a key lives in one partition). */
export class Reference {
  /** Each key's state after the fold (a deleted key is absent). */
  readonly states = new Map<string, ChaosState>();
  /** Every output the fold emits, by source (`outputSource`), as canonical JSON. */
  readonly outputs = new Map<string, string>();
  /** Every dead letter the flow must produce, by `<partition>/<offset>`, with the record's value as produced. */
  readonly deadLetters = new Map<string, string>();
  readonly log = new InputLog();
  /** Each key's pending timers: `pulse` and the stateTtl one, by time. */
  private readonly timers = new Map<string, Map<string, number>>();
  /** Per partition: its watermark (highest timestamp so far) and its timers, earliest first. */
  private readonly partitions = new Map<number, { watermark: number; due: EntryHeap }>();

  /** `timers`: the flow runs with its key timers (chaos `--timers on`). */
  constructor(
    readonly topic: string,
    private readonly withTimers = true,
  ) {}

  add(r: InputRecord): void {
    this.log.add(r);
    // Event time: before the record folds, every timer at or before the highest timestamp so far fires.
    const p = this.partitionOf(r.partition);
    const ts = Number(r.timestamp ?? 0);
    if (ts > p.watermark) p.watermark = ts;
    if (this.withTimers) this.fireDue(r.partition, p);
    if (isPoison(r.value)) {
      this.deadLetters.set(deadLetterSource(r), r.raw ?? JSON.stringify(r.value ?? null));
      return;
    }
    const before = this.states.get(r.key);
    const next = chaosStep(before, r.offset, r.value!);
    if (next === undefined) {
      this.states.delete(r.key);
      this.timers.delete(r.key);
    } else {
      this.states.set(r.key, next);
      if (this.withTimers && pulses(r.key)) this.setTimer(p, r.key, PULSE, ts + PULSE_MS);
      if (this.withTimers) this.setTimer(p, r.key, TTL, ts + CHAOS_TTL_MS);
    }
    const output = chaosOutput(before, next, r.offset);
    if (output) this.outputs.set(outputSource(this.topic, r), JSON.stringify(output));
  }

  private partitionOf(partition: number): { watermark: number; due: EntryHeap } {
    let p = this.partitions.get(partition);
    if (!p) {
      p = { watermark: Number.NEGATIVE_INFINITY, due: new EntryHeap() };
      this.partitions.set(partition, p);
    }
    return p;
  }

  /** Sets a key's timer; a heap entry only when it is new or earlier (a later one is re-queued when its old entry comes up). */
  private setTimer(p: { due: EntryHeap }, key: string, name: string, at: number): void {
    let mine = this.timers.get(key);
    if (!mine) {
      mine = new Map();
      this.timers.set(key, mine);
    }
    const old = mine.get(name);
    mine.set(name, at);
    if (old === undefined || at < old) p.due.push([at, key, name]);
  }

  private fireDue(partition: number, p: { watermark: number; due: EntryHeap }): void {
    for (let top = p.due.peek(); top !== undefined && top[0] <= p.watermark; top = p.due.peek()) {
      p.due.pop();
      const [at, key, name] = top;
      const current = this.timers.get(key)?.get(name);
      if (current === undefined || current < at) continue;
      if (current > at) {
        p.due.push([current, key, name]);
        continue;
      }
      const state = this.states.get(key)!;
      if (name === TTL) {
        this.states.delete(key);
        this.timers.delete(key);
        continue;
      }
      this.timers.get(key)!.delete(name);
      const next = chaosFire(state, at);
      this.states.set(key, next);
      const output = chaosFireOutput(next, at);
      if (output) this.outputs.set(fireSource(this.topic, partition, key, name, at), JSON.stringify(output));
    }
  }
}

/** Records must come in offset order within each partition (a key lives in one partition). */
export function referenceFold(records: Iterable<InputRecord>): Map<string, ChaosState> {
  const ref = new Reference('');
  for (const r of records) ref.add(r);
  return ref.states;
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

const same = (a: ChaosState, b: ChaosState) =>
  a.count === b.count && a.counter === b.counter && a.hash === b.hash && a.last === b.last && (a.fires ?? 0) === (b.fires ?? 0);

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
  const f = (s?: ChaosState) => (s ? `count=${s.count} counter=${s.counter} hash=${s.hash} last=${s.last} fires=${s.fires ?? 0}` : '(absent)');
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
  const ref = new Reference(topic);
  for (const r of records) ref.add(r);
  return ref.outputs;
}

/** `<partition>/<offset>`: a dead letter's source, from its kafka-flow-dead-letter-* headers. */
export const deadLetterSource = (r: Pick<InputRecord, 'partition' | 'offset'>) => `${r.partition}/${r.offset}`;

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
 * Compares what the output topic holds with the reference outputs, one output read at a time (no
 * copy of the topic kept). Exactly-once: each expected output once, nothing else. At-least-once:
 * each expected output at least once, every copy the same, nothing else — so after deduplication
 * by source, exactly once. `canon` puts a value in the form `expected` holds (JSON by default).
 */
export class OutputCheck {
  private readonly seen = new Map<string, number>();
  private readonly examples: string[] = [];
  private wrong = 0;
  private read = 0;

  constructor(
    private readonly expected: ReadonlyMap<string, string>,
    private readonly delivery: Delivery,
    private readonly canon: (value: string) => string | undefined = canonical,
  ) {}

  private example(line: string): void {
    if (this.examples.length < 10) this.examples.push(line);
  }

  add(o: ReadOutput): void {
    this.read++;
    const want = o.source === undefined ? undefined : this.expected.get(o.source);
    if (want === undefined || this.canon(o.value) !== want) {
      this.wrong++;
      this.example(`wrong: ${o.source ?? '(no source header)'} = ${o.value}${want === undefined ? ' (no record emits it)' : `, expected ${want}`}`);
      return;
    }
    this.seen.set(o.source!, (this.seen.get(o.source!) ?? 0) + 1);
  }

  verdict(): OutputVerdict {
    let lost = 0;
    let extra = 0;
    for (const [source, value] of this.expected) {
      const n = this.seen.get(source) ?? 0;
      if (n === 0) {
        lost++;
        this.example(`lost: ${source} = ${value}`);
      } else if (n > 1) {
        extra += n - 1;
        if (this.delivery === 'exactly-once') this.example(`duplicated: ${source} × ${n}`);
      }
    }
    return {
      delivery: this.delivery,
      expected: this.expected.size,
      read: this.read,
      wrong: this.wrong,
      lost,
      duplicated: this.delivery === 'exactly-once' ? extra : 0,
      redelivered: this.delivery === 'at-least-once' ? extra : 0,
      examples: [...this.examples],
    };
  }
}

export function compareOutputs(expected: ReadonlyMap<string, string>, actual: Iterable<ReadOutput>, delivery: Delivery, canon?: (value: string) => string | undefined): OutputVerdict {
  const check = new OutputCheck(expected, delivery, canon);
  for (const o of actual) check.add(o);
  return check.verdict();
}
