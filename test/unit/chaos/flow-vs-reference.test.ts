// Property: the chaos suite's own flow (chaos/flow.ts: async keys, poison records, outputs, event
// timers and stateTtl) run by the engine on the in-memory backend, through persists and crashes
// (the input replayed from the committed offset), ends in the states and emits the outputs the
// oracle's reference (chaos/oracle.ts) computes from the input — so that a difference a chaos run
// reports is the system's, not a disagreement between the flow and its oracle.
import fc from 'fast-check';
import { CHAOS_TTL_MS, type ChaosState, type ChaosValue, chaosFlow, PULSE_MS } from '../../../chaos/flow';
import { type InputRecord, Reference } from '../../../chaos/oracle';
import { createPartitionFlow } from '../../../flow/create-partition-flow';
import type { InputMessage } from '../../../flow/record';
import { InMemoryBackend } from '../../../persistence/memory';

const TOPIC = 'chaos-in';
const TP = { topic: TOPIC, partition: 0 };
const definition = chaosFlow({ name: 'chaos-unit', topic: TOPIC, backend: 'kafka', maxWrites: 3, maxPendingOutputs: 1_000 });

interface Row {
  key: string;
  value: string;
  ts: number;
}

const rowsArb = fc
  .array(
    fc.record({
      key: fc.constantFrom('k0', 'k1', 'k2', 'k5', 'k6', 'k9', 'k9', 'k9'), // k0, k6, k9 fold asynchronously; k1, k5, k9 have pulse timers
      op: fc.constantFrom('inc', 'inc', 'inc', 'dec', 'poison', 'not json'),
      gap: fc.constantFrom(0, 0, 500, 1_000, 2_000, PULSE_MS, CHAOS_TTL_MS / 2, CHAOS_TTL_MS + 1),
    }),
    { minLength: 1, maxLength: 80 },
  )
  .map((rows) => {
    let ts = 1_767_225_600_000;
    return rows.map((r): Row => {
      ts += r.gap;
      return { key: r.key, value: r.op === 'not json' ? 'not json' : JSON.stringify({ op: r.op } satisfies ChaosValue), ts };
    });
  });
const stepsArb = fc.array(fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constant('persist' as const), fc.constant('crash' as const)), { maxLength: 25 });

const messages = (rows: readonly Row[], from: number, to: number): InputMessage[] =>
  rows.slice(from, to).map((r, i) => ({ offset: String(from + i), key: Buffer.from(r.key), value: Buffer.from(r.value), timestamp: String(r.ts) }));

test('the chaos flow in the engine agrees with its oracle, through persists and crashes', async () => {
  let fires = 0;
  await fc.assert(
    fc.asyncProperty(rowsArb, stepsArb, async (rows, steps) => {
      const backend = new InMemoryBackend<ChaosState, ChaosValue>();
      const start = async () => {
        const flow = createPartitionFlow(definition as never, {
          topic: TOPIC,
          partition: 0,
          assignedAt: String(backend.committer.committed(TP) ?? 0),
          persistence: backend.forPartition(TP, 'snapshots', 3),
        }) as ReturnType<typeof createPartitionFlow<ChaosState, ChaosValue>>;
        await flow.recover();
        return flow;
      };
      let flow = await start();
      let fed = 0;
      for (const step of [...steps, rows.length]) {
        if (typeof step === 'number') {
          const to = Math.min(rows.length, fed + step);
          if (to > fed) {
            // The owner's tick comes while async folds of the batch are still running, as in a worker.
            const batch = flow.handleBatch(messages(rows, fed, to));
            flow.triggerTimers();
            // …and so may a persist (the owner's cadence, an outputs persist).
            const persist = flow.persist(Date.now(), 'idle');
            await new Promise((r) => setImmediate(r));
            flow.triggerTimers();
            await batch;
            await persist;
          }
          fed = to;
        } else if (step === 'persist') {
          await flow.persist(Date.now(), 'idle');
        } else {
          flow = await start();
          fed = backend.committer.committed(TP) ?? 0;
        }
      }
      if (fed < rows.length) await flow.handleBatch(messages(rows, fed, rows.length));
      await flow.drained();
      await flow.persist(Date.now(), 'shutdown');

      const reference = new Reference(TOPIC);
      rows.forEach((r, i) => {
        let value: ChaosValue | undefined;
        try {
          value = JSON.parse(r.value) as ChaosValue;
        } catch {
          value = undefined;
        }
        reference.add({ partition: 0, offset: String(i), key: r.key, value, raw: r.value, timestamp: String(r.ts) } satisfies InputRecord);
      });
      const persisted = new Map([...backend.snapshots.entries(TP)].map(([k, s]) => [k, s.state]));
      expect(persisted).toEqual(reference.states);
      const emitted = new Map<string, string>();
      for (const o of backend.outputs.sent) {
        if (o.topic !== `${TOPIC}-outputs`) continue;
        emitted.set(String(o.headers?.['kafka-flow-source']), JSON.stringify(JSON.parse(String(o.value))));
      }
      expect(emitted).toEqual(reference.outputs);
      fires += [...reference.outputs.keys()].filter((k) => k.includes("/timer:")).length;
    }),
    { numRuns: 300 },
  );
  // The runs did exercise the timers: fires that emitted (a quarter of the fires) across them.
  expect(fires).toBeGreaterThan(50);
}, 30_000); // 300 property runs: 1.4–2.4 s alone, past jest's 5 s beside the integration files
