// kafka-flow's TimerFlowOfSpec (16 behaviours), each run for the single timer and for both timers
// together (kafka-flow's persistPeriodicallyAndUnloadOrphaned), through a whole PartitionFlow.
// "Flushed" is a snapshot write that landed; "removed" is the key leaving memory.
import { PersistFailedError } from '../../../flow/errors';
import type { WithheldMessageError } from '../../../core/redact';
import type { TimersOptions } from '../../../flow/timers';
import { InMemoryBackend } from '../../../persistence/memory';
import { StorePartitionPersistence } from '../../../persistence/store-partition-persistence';
import { type Count, countingFold, harness, keyless, MINUTE, records, TP } from './harness';

const fold = countingFold(1_000_000);

async function fixture(timers: TimersOptions, assignedAt: number, failing = false) {
  const backend = new InMemoryBackend<Count, string>();
  const persistence = failing
    ? new StorePartitionPersistence<Count, string>({
        partition: TP,
        mode: 'snapshots',
        snapshots: {
          read: async () => undefined,
          readAll: async function* () {},
          writeBatch: async () => {
            throw new Error('Test error');
          },
        },
        committer: backend.committer,
      })
    : undefined;
  const h = await harness({ fold, timers, assignedAt, backend, persistence });
  return {
    ...h,
    flushed: () => backend.snapshots.writes,
    removed: () => h.flow.stateOf('key') === undefined,
  };
}

const unloadVariants: [string, (extra?: { flushOnRevoke?: boolean }) => TimersOptions][] = [
  ['unloadOrphaned', (x = {}) => ({ unloadOrphaned: { fireEvery: 0, maxOffsetDifference: 3, ...x } })],
  [
    'persistPeriodicallyAndUnloadOrphaned',
    (x = {}) => ({ persistPeriodically: { fireEvery: 0 }, unloadOrphaned: { fireEvery: 0, maxOffsetDifference: 3, ...x } }),
  ],
];

describe.each(unloadVariants)('%s (kafka-flow TimerFlowOfSpec)', (_, timers) => {
  test('holds commits when started', async () => {
    const f = await fixture(timers(), 1234);
    await f.flow.handleBatch(records('key', 1234, ['e']));
    expect(f.flow.holdingOf('key')).toBe(1234);
    expect(f.flow.offsetToCommit()).toBeUndefined();
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
  });

  test('does not flush immediately', async () => {
    const f = await fixture(timers(), 100);
    await f.step(records('key', 100, ['e']));
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
  });

  test('flushes after the offset difference is exceeded', async () => {
    const f = await fixture(timers(), 1000);
    await f.step(records('key', 1000, ['e']));
    for (let o = 1001; o <= 1003; o++) await f.step(keyless(o, 1));
    expect(f.flushed()).toBe(1);
    expect(f.removed()).toBe(true);
    expect(f.committed()).toBe(1004);
  });

  test('does not flush before the offset difference is exceeded', async () => {
    const f = await fixture(timers(), 1000);
    await f.step(records('key', 1000, ['e']));
    for (let o = 1001; o <= 1002; o++) await f.step(keyless(o, 1));
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
    expect(f.committed()).toBeUndefined();
  });

  test('does not flush if the state was timely touched', async () => {
    const f = await fixture(timers(), 1000);
    await f.step(records('key', 1000, ['e']));
    for (let o = 1001; o <= 1002; o++) await f.step(keyless(o, 1));
    await f.step(records('key', 1003, ['e']));
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
  });

  test('flushes on revoke if configured to', async () => {
    const f = await fixture(
      _ === 'unloadOrphaned' ? { unloadOrphaned: { flushOnRevoke: true } } : { persistPeriodically: {}, unloadOrphaned: { flushOnRevoke: true } },
      100,
    );
    await f.step(records('key', 100, ['e']));
    await f.flow.persist(f.clock.now(), 'revoke');
    expect(f.flushed()).toBe(1);
    expect(f.committed()).toBe(101);
  });

  test('does not flush on revoke if not configured to', async () => {
    const f = await fixture(_ === 'unloadOrphaned' ? { unloadOrphaned: {} } : { persistPeriodically: {}, unloadOrphaned: {} }, 100);
    await f.step(records('key', 100, ['e']));
    await f.flow.persist(f.clock.now(), 'revoke');
    expect(f.flushed()).toBe(0);
    expect(f.committed()).toBeUndefined();
    expect(f.flow.holdingOf('key')).toBe(100);
  });

  test('flushes after the offset difference is exceeded even if flushOnRevoke is on', async () => {
    const f = await fixture(timers({ flushOnRevoke: true }), 1000);
    await f.step(records('key', 1000, ['e']));
    for (let o = 1001; o <= 1003; o++) await f.step(keyless(o, 1));
    expect(f.flushed()).toBe(1);
    expect(f.removed()).toBe(true);
  });
});

const persistVariants: [string, (p?: object) => TimersOptions][] = [
  ['persistPeriodically', (p = {}) => ({ persistPeriodically: { fireEvery: MINUTE, ...p } })],
  [
    'persistPeriodicallyAndUnloadOrphaned',
    (p = {}) => ({ persistPeriodically: { fireEvery: MINUTE, ...p }, unloadOrphaned: { fireEvery: MINUTE } }),
  ],
];

describe.each(persistVariants)('%s (kafka-flow TimerFlowOfSpec)', (_, timers) => {
  test('holds commits when started', async () => {
    const f = await fixture(timers(), 1234);
    await f.flow.handleBatch(records('key', 1234, ['e']));
    expect(f.flow.holdingOf('key')).toBe(1234);
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
  });

  test('does not flush immediately', async () => {
    const f = await fixture(timers(), 100);
    await f.step(records('key', 100, ['e']));
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
  });

  test('flushes the right number of times', async () => {
    const f = await fixture(timers(), 100);
    await f.step(records('key', 100, ['e']));
    for (let i = 1; i <= 3; i++) {
      f.clock.advance(MINUTE);
      await f.step(records('key', 100 + i, ['e']));
    }
    expect(f.flushed()).toBe(3);
    expect(f.removed()).toBe(false);
    expect(f.flow.holdingOf('key')).toBe(104);
    expect(f.committed()).toBe(104);
  });

  test('flushes on revoke if configured to', async () => {
    const f = await fixture(timers({ flushOnRevoke: true }), 100);
    await f.step(records('key', 100, ['e']));
    await f.flow.persist(f.clock.now(), 'revoke');
    expect(f.flushed()).toBe(1);
    expect(f.committed()).toBe(101);
  });

  test('does not flush on revoke if not configured to', async () => {
    const f = await fixture(timers({ flushOnRevoke: false }), 100);
    await f.step(records('key', 100, ['e']));
    await f.flow.persist(f.clock.now(), 'revoke');
    expect(f.flushed()).toBe(0);
    expect(f.committed()).toBeUndefined();
  });

  test('flushes periodically even if flushOnRevoke is on', async () => {
    const f = await fixture(timers({ fireEvery: 0, persistEvery: 0, flushOnRevoke: true }), 100);
    await f.step(records('key', 100, ['e']));
    expect(f.flushed()).toBe(1);
  });

  test('fails on persist errors when ignorePersistErrors = false', async () => {
    const f = await fixture(timers({ ignorePersistErrors: false }), 100, true);
    await f.step(records('key', 100, ['e']));
    f.clock.advance(MINUTE);
    const error = await f.step(keyless(101, 1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PersistFailedError);
    expect((error as PersistFailedError).code).toBe('PERSIST_FAILED');
    // Withheld from the message (logKeys is off: a plain Error may quote the state), kept out of sight.
    expect(((error as Error).cause as WithheldMessageError).original).toEqual(new Error('Test error'));
    // The partition is stopped: later calls rethrow the same error.
    expect(() => f.flow.triggerTimers()).toThrow(error as Error);
  });

  test('handles persist errors when ignorePersistErrors = true', async () => {
    const f = await fixture(timers({ ignorePersistErrors: true }), 100, true);
    await f.step(records('key', 100, ['e']));
    f.clock.advance(MINUTE);
    await f.step(keyless(101, 1));
    f.clock.advance(MINUTE);
    await f.step(keyless(102, 1));
    expect(f.flushed()).toBe(0);
    expect(f.removed()).toBe(false);
    expect(f.flow.holdingOf('key')).toBe(100);
    expect(f.committed()).toBeUndefined();
    expect(await f.metrics.registry.getSingleMetricAsString('kafka_flow_persisted_keys_total')).toMatch(/outcome="failed"} 2/);
  });
});
