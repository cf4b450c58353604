// Property: event-time key timers and stateTtl, through any interleaving of batches, persists and
// crashes (the partition dropped unpersisted and recovered from the store, its input replayed from
// the committed offset), end in the state and the outputs a reference model gives — every fire
// exactly once. The model folds the records in offset order and, before each, fires every timer at
// or before the highest timestamp so far (earliest first, then by key and name; timers set by those
// fires included), as the engine does — for a key whose fold is asynchronous too (`c`: its fires
// wait in its queue). Timestamps do not go
// back within the partition (one producer's CreateTime): then the watermark at a record does not
// depend on where a replay started. The same holds with a bounded state cache of one key over an
// in-memory fake of the local store (keys with timers leave memory; the fake's due-time lookup
// brings them back when due).
import fc from 'fast-check';
import type { Fold, OnTimer } from '../../../flow/fold';
import type { InputMessage } from '../../../flow/record';
import { InMemoryBackend } from '../../../persistence/memory';
import { StateCache } from '../../../flow/state-cache';
import { harness, TP } from './harness';
import { onDemandWithFakeDueIndex, withReadNow } from './on-demand-fake';

interface State {
  n: number;
  fires: number;
}
interface Timer {
  name: string;
  at: number;
}

const TTL = 200;
const TTL_NAME = 'kafka-flow:ttl';

/** A record's value: a delay (a timer `w` that far past its timestamp; negative: already due) or 0 (cancel it). */
const syncFold: Fold<State, string> = (s, r, ctx) => {
  const delay = Number(r.value);
  if (delay === 0) ctx.timers.cancel('w');
  else ctx.timers.at(Number(r.timestamp) + delay, { name: 'w', time: 'event' });
  return { n: (s?.n ?? 0) + 1, fires: s?.fires ?? 0 };
};
/** Key `c` folds asynchronously: its fires wait in its queue, in their turn. */
const fold: Fold<State, string> = (s, r, ctx) => (r.key === 'c' ? Promise.resolve().then(() => syncFold(s, r, ctx)) : syncFold(s, r, ctx));
/** Each fire emits; a fire of `w` sets `w2` 7 later (a timer set by a fire); the third fire deletes the key. */
const onTimer: OnTimer<State> = (s, t, ctx) => {
  ctx.emit({ topic: 'out', key: t.key, value: `${t.key}@${t.at}#${s.fires + 1}` });
  if (s.fires + 1 >= 3) return undefined;
  if (t.name === 'w') ctx.timers.at(t.at + 7, { name: 'w2', time: 'event' });
  return { ...s, fires: s.fires + 1 };
};

interface Input {
  key: string;
  value: string;
  ts: number;
}

/** The reference: records in order, the timers each one's timestamp passes fired first. */
function model(input: readonly Input[]): { states: Map<string, State>; outputs: string[] } {
  const states = new Map<string, State>();
  const timers = new Map<string, Timer[]>();
  const outputs: string[] = [];
  const fireDue = (until: number) => {
    for (;;) {
      const due = [...timers]
        .flatMap(([key, ts]) => ts.map((t) => ({ key, ...t })))
        .filter((t) => t.at <= until)
        .sort((a, b) => a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.name < b.name ? -1 : 1));
      const t = due[0];
      if (!t) break;
      const rest = timers.get(t.key)!.filter((x) => x.name !== t.name);
      const s = states.get(t.key)!;
      if (t.name === TTL_NAME) {
        states.delete(t.key);
        timers.delete(t.key);
        continue;
      }
      outputs.push(`${t.key}@${t.at}#${s.fires + 1}`);
      if (s.fires + 1 >= 3) {
        states.delete(t.key);
        timers.delete(t.key);
      } else {
        states.set(t.key, { ...s, fires: s.fires + 1 });
        timers.set(t.key, t.name === 'w' ? [...rest.filter((x) => x.name !== 'w2'), { name: 'w2', at: t.at + 7 }] : rest);
      }
    }
  };
  for (const r of input) {
    fireDue(r.ts);
    const s = states.get(r.key);
    let ts = (timers.get(r.key) ?? []).filter((x) => x.name !== TTL_NAME);
    const delay = Number(r.value);
    ts = ts.filter((x) => x.name !== 'w');
    if (delay !== 0) ts.push({ name: 'w', at: r.ts + delay });
    else ts = (timers.get(r.key) ?? []).filter((x) => x.name !== 'w' && x.name !== TTL_NAME);
    ts.push({ name: TTL_NAME, at: r.ts + TTL });
    timers.set(r.key, ts);
    states.set(r.key, { n: (s?.n ?? 0) + 1, fires: s?.fires ?? 0 });
  }
  return { states, outputs };
}

const inputArb = fc
  .array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), value: fc.constantFrom('0', '-3', '5', '20', '60', '300'), gap: fc.constantFrom(0, 0, 1, 10, 40) }), { minLength: 1, maxLength: 60 })
  .map((rows) => {
    let ts = 1_000;
    const input: Input[] = rows.map((r) => {
      ts += r.gap;
      return { key: r.key, value: r.value, ts };
    });
    // A last record of another key 1 later: every timer due by the end fires before it. (The
    // watermark is not persisted: after a restart, event timers fire once records pass them again.)
    input.push({ key: 'z', value: '0', ts: ts + 1 });
    return input;
  });
const stepsArb = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('batch' as const), size: fc.integer({ min: 1, max: 8 }) }),
    fc.constant({ kind: 'persist' as const }),
    fc.constant({ kind: 'crash' as const }),
    fc.constant({ kind: 'tick' as const }),
  ),
  { maxLength: 40 },
);

const messages = (input: readonly Input[], from: number, to: number): InputMessage[] =>
  input.slice(from, to).map((r, i) => ({ offset: String(from + i), key: Buffer.from(r.key), value: Buffer.from(r.value), timestamp: String(r.ts) }));

test('event-time timers and stateTtl: every fire exactly once through persists and crashes', async () => {
  await fc.assert(
    fc.asyncProperty(inputArb, stepsArb, fc.constantFrom(undefined, 1, 3), fc.constantFrom('memory', 'cached', 'cached-read-now'), async (input, steps, asyncConcurrency, keys) => {
      const cached = keys !== 'memory';
      const backend = new InMemoryBackend<State, string>();
      const extra = {
        onTimer,
        stateTtl: { ms: TTL, time: 'event' as const },
        asyncConcurrency, // unset: batch by batch; 1 or 3: pipelined (batches return while keys still fold)
        outputs: { topics: new Set(['out']), encoder: { encode: (v: unknown) => Buffer.from(String(v)) } },
      };
      const start = () =>
        harness<State>({
          fold,
          backend,
          extra: cached ? { ...extra, stateCache: new StateCache({ maxKeys: 1 }) } : extra,
          ...(cached ? { persistence: keys === 'cached-read-now' ? withReadNow(onDemandWithFakeDueIndex(backend), backend) : onDemandWithFakeDueIndex(backend) } : {}),
          assignedAt: backend.committer.committed(TP) ?? 0,
        });
      let h = await start();
      let fed = 0;
      for (const step of [...steps, { kind: 'batch' as const, size: input.length }]) {
        if (step.kind === 'batch') {
          const to = Math.min(input.length, fed + step.size);
          if (to > fed) await h.flow.handleBatch(messages(input, fed, to));
          fed = to;
        } else if (step.kind === 'persist') {
          await h.flow.persist(h.clock.now(), 'idle');
        } else if (step.kind === 'tick') {
          h.flow.triggerTimers(h.clock.now());
        } else {
          // Crash: what is not persisted is gone; the next owner replays from the committed offset.
          h = await start();
          fed = backend.committer.committed(TP) ?? 0;
        }
      }
      while (fed < input.length) {
        await h.flow.handleBatch(messages(input, fed, input.length));
        fed = input.length;
      }
      await h.flow.drained();
      await h.flow.persist(h.clock.now(), 'shutdown');
      const expected = model(input);
      const persisted = new Map([...backend.snapshots.entries(TP)].map(([k, s]) => [k, s.state]));
      expect(persisted).toEqual(expected.states);
      expect(backend.outputs.sent.map((o) => String(o.value)).sort()).toEqual([...expected.outputs].sort());
    }),
    { numRuns: 500 },
  );
});
