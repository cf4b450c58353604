// Property: whatever the interleaving of batches, timers, persist failures and restarts from the
// persisted state (batches folded while a persist's chunks are in flight among them), the flow ends in the state a plain fold over the input gives, and no record is
// applied twice (each key's state lists the offsets folded into it since its last reset). The
// fold deletes state-dependently ('pop' of the last entry deletes the key; 'pop' of nothing is a
// state of its own), so a replay that restarts a deleted key from empty shows; every 'x' emits an
// output, and each must be produced (several per key between its writes, some under maxPendingOutputs). Only the injected
// faults restart the partition: any other error from the engine fails the property.
import fc from 'fast-check';
import { ManualClock } from '../../../flow/clock';
import { WithheldMessageError } from '../../../core/redact';
import { discardingContext, type Fold } from '../../../flow/fold';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { timerPolicy, type TimersOptions } from '../../../flow/timers';
import { InMemoryBackend } from '../../../persistence/memory';
import type { PartitionPersistence } from '../../../flow/ports';
import type { PersistenceMode } from '../../../core/persistence-types';
import { Registry } from 'prom-client';
import { TP, textCodec } from './harness';

type State = string[];
const syncFold: Fold<State, string> = (s, r, ctx) => {
  if (r.value === 'boom') throw new Error('a poison record'); // skipped or dead-lettered by policy
  if (r.value === 'reset') return undefined;
  if (r.value === 'pop') {
    if (s === undefined) return [`-${r.offset}`]; // differs from what the same record does to a state
    return s.length === 1 ? undefined : s.slice(0, -1);
  }
  // Every 'x' emits (a run of several outputs on a key between its writes); the reference fold discards them.
  if (r.value === 'x') ctx.emit({ topic: 'out', key: r.key, value: r.offset });
  return [...(s ?? []), r.offset];
};

/** An error an injected fault caused (anything else is a bug the property must report). */
function injected(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause) {
    if (/injected/.test(e.message)) return true;
    // A cause withheld from messages (logKeys is off) keeps the original out of sight.
    if (e instanceof WithheldMessageError) return injected(e.original);
  }
  return false;
}
const asyncFold: Fold<State, string> = (s, r, ctx) => Promise.resolve(syncFold(s, r, ctx));

/** 0: the write goes through; 1: it fails, nothing lands; 2: writes land, the offset commit fails. */
type Fault = 0 | 1 | 2;

/**
 * The in-memory store with injected faults. `atomic`: writes and commit land together or not at
 * all (a Kafka transaction), so a failed commit is a failed write. `between` runs before each
 * write that carries keys: a batch folded while the persist's chunks are in flight.
 */
function faulty(
  inner: PartitionPersistence<State, string>,
  faults: () => Fault,
  atomic: boolean,
  between: () => Promise<void>,
): PartitionPersistence<State, string> {
  return {
    maxWritesPerBatch: inner.maxWritesPerBatch,
    atomicCommit: atomic,
    recover: () => inner.recover(),
    read: (key) => inner.read(key),
    async write(batch) {
      if (batch.writes.length > 0) await between();
      const fault = faults();
      if (fault === 1 || (fault === 2 && atomic)) throw new Error('injected write failure');
      if (fault === 2 && batch.commitOffset !== undefined) {
        if (batch.writes.length === 0) throw new Error('injected commit failure');
        const r = await inner.write({ writes: batch.writes });
        return { ...r, committed: false, commitError: new Error('injected commit failure') };
      }
      return inner.write(batch);
    },
  };
}

function plainFold(messages: readonly InputMessage[]): Map<string, State> {
  const states = new Map<string, State | undefined>();
  for (const m of messages) {
    if (m.key === null) continue;
    const key = String(m.key);
    if (String(m.value) === 'boom') continue;
    const next = syncFold(states.get(key), { topic: TP.topic, partition: TP.partition, offset: m.offset, key, value: String(m.value), timestamp: '0', headers: {} }, discardingContext);
    states.set(key, next as State | undefined);
  }
  return new Map([...states].filter((e): e is [string, State] => e[1] !== undefined));
}

const op = fc.oneof(
  fc.record({ kind: fc.constant('batch' as const), size: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ kind: fc.constant('restart' as const) }),
  fc.record({ kind: fc.constant('revoke' as const) }),
  fc.record({ kind: fc.constant('fold-during-persist' as const), size: fc.integer({ min: 1, max: 8 }), reason: fc.constantFrom('periodic' as const, 'idle' as const, 'shutdown' as const) }),
);

const scenario = fc.record({
  input: fc.array(
    fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', null), value: fc.constantFrom('x', 'x', 'y', 'pop', 'pop', 'reset', 'boom') }),
    { minLength: 1, maxLength: 60 },
  ),
  ops: fc.array(op, { maxLength: 40 }),
  faults: fc.array(fc.constantFrom<Fault>(0, 0, 0, 1, 2), { minLength: 1, maxLength: 20 }),
  mode: fc.constantFrom<PersistenceMode>('snapshots', 'journal', 'journal+snapshots'),
  chunk: fc.constantFrom(1, 2, Number.POSITIVE_INFINITY),
  atomic: fc.boolean(),
  async: fc.boolean(),
  onFoldFailure: fc.constantFrom<'skip' | 'dead-letter'>('skip', 'dead-letter'),
  maxPendingOutputs: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  timers: fc.record({
    persistPeriodically: fc.option(
      fc.record({
        fireEvery: fc.integer({ min: 0, max: 2 }),
        persistEvery: fc.integer({ min: 0, max: 3 }),
        ignorePersistErrors: fc.boolean(),
        flushOnRevoke: fc.boolean(),
      }),
      { nil: undefined },
    ),
    unloadOrphaned: fc.option(
      fc.record({ fireEvery: fc.integer({ min: 0, max: 2 }), maxOffsetDifference: fc.integer({ min: 1, max: 10 }), maxIdle: fc.integer({ min: 1, max: 5 }) }),
      { nil: undefined },
    ),
  }),
});

describe('PartitionFlow property: restarts and failures never change the result', () => {
  test('ends in the plain fold of the input, with no record applied twice', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const messages: InputMessage[] = s.input.map((r, i) => ({
          offset: String(i),
          key: r.key === null ? null : Buffer.from(r.key),
          value: Buffer.from(r.value),
          timestamp: '0',
        }));
        const backend = new InMemoryBackend<State, string>();
        const clock = new ManualClock(0);
        let faultIndex = 0;
        let faultsOn = true;
        const nextFault = (): Fault => (faultsOn ? s.faults[faultIndex++ % s.faults.length]! : 0);
        const timers: TimersOptions = {
          persistPeriodically: s.timers.persistPeriodically,
          unloadOrphaned: s.timers.unloadOrphaned,
        };
        const metrics = FlowMetrics.of(new Registry());

        let flow!: PartitionFlow<State, string>;
        let position = 0;
        /** A batch to fold at the next write that carries keys (once). */
        let armed: InputMessage[] | undefined;
        const between = async () => {
          const batch = armed;
          armed = undefined;
          if (batch === undefined) return;
          await flow.handleBatch(batch);
          position += batch.length;
        };
        const start = async () => {
          const committed = backend.committer.committed(TP) ?? 0;
          flow = new PartitionFlow<State, string>({
            flow: 'prop',
            topic: TP.topic,
            partition: TP.partition,
            assignedAt: String(committed),
            fold: s.async ? asyncFold : syncFold,
            codec: textCodec,
            persistence: faulty(backend.forPartition(TP, s.mode, s.chunk), nextFault, s.atomic, between),
            mode: s.mode,
            timers: timerPolicy(timers),
            onFoldFailure: s.onFoldFailure,
            deadLetterTopic: 'dead-letters',
            outputs: { topics: new Set(['out']), encoder: { encode: (v) => Buffer.from(String(v)), encodeText: (v) => String(v) } },
            maxPendingOutputs: s.maxPendingOutputs,
            clock,
            metrics,
          });
          await flow.recover();
          position = committed;
          armed = undefined;
        };
        const attempt = async (f: () => unknown) => {
          try {
            await f();
          } catch (err) {
            if (!injected(err)) throw err;
            await start(); // the partition stopped: the next owner recovers from what was persisted
          }
        };

        await start();
        for (const o of s.ops) {
          if (o.kind === 'batch') {
            const batch = messages.slice(position, position + o.size);
            if (batch.length === 0) continue;
            await attempt(async () => {
              await flow.handleBatch(batch);
              position += batch.length;
            });
          } else if (o.kind === 'tick') {
            clock.advance(o.ms);
            await attempt(async () => {
              flow.triggerTimers();
              await flow.persist(clock.now(), 'periodic');
            });
          } else if (o.kind === 'fold-during-persist') {
            const batch = messages.slice(position, position + o.size);
            if (batch.length === 0) continue;
            armed = batch;
            clock.advance(1);
            await attempt(async () => {
              flow.triggerTimers();
              await flow.persist(clock.now(), o.reason);
            });
            // No write carried keys (nothing to persist): fold it now.
            if (armed !== undefined) await attempt(between);
          } else if (o.kind === 'revoke') {
            await attempt(() => flow.persist(clock.now(), 'revoke'));
            await start();
          } else {
            await start();
          }
        }

        // Drain the rest of the input without faults, persist everything, and restart once more.
        faultsOn = false;
        await flow.handleBatch(messages.slice(position));
        const expected = plainFold(messages);
        // Keys in memory hold the right state (unloaded orphans are only in the store).
        for (const [key, state] of flow.states()) expect(state).toEqual(expected.get(key));
        await flow.persist(clock.now(), 'shutdown');
        expect(backend.committer.committed(TP) ?? 0).toBe(messages.length);
        await start();
        expect(new Map(flow.states())).toEqual(expected);
        // The committed offset passed every delete marker: the next persist purges them all.
        await flow.persist(clock.now(), 'shutdown');
        expect(backend.snapshots.markers(TP)).toEqual(new Map());
        // Every poison record was dead-lettered (at least once: this backend has no transaction).
        const booms = messages.filter((m) => String(m.value) === 'boom' && m.key !== null).map((m) => m.offset);
        if (s.onFoldFailure === 'dead-letter') {
          const lettered = new Set(backend.outputs.sent.filter((o) => o.topic === 'dead-letters').map((o) => String(o.headers?.['kafka-flow-dead-letter-offset'])));
          expect([...lettered].sort()).toEqual([...new Set(booms)].sort());
        } else expect(backend.outputs.sent.filter((o) => o.topic === 'dead-letters')).toEqual([]);
        // Every emit of a record that stays folded was produced (at least once: no transaction here).
        const emitted = new Set(backend.outputs.sent.filter((o) => o.topic === 'out').map((o) => String(o.headers?.['kafka-flow-source'])));
        const emits = messages.filter((m) => String(m.value) === 'x' && m.key !== null).map((m) => `${TP.topic}/${TP.partition}/${m.offset}/0`);
        expect(emits.filter((e) => !emitted.has(e))).toEqual([]);
        if (s.mode !== 'journal') expect(backend.snapshots.entries(TP)).toEqual(new Map([...expected].map(([k, v]) => [k, expect.objectContaining({ state: v })])));
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 300) },
    );
  });
});
