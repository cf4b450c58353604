import { ConfigError } from '../../config/errors';
import { defineFlow } from '../../index';

const base = { name: 'sales', groupId: 'sales', topics: ['sales'], fold: (s: number | undefined) => (s ?? 0) + 1 };

describe('defineFlow', () => {
  test("fills in kafka-flow's defaults", () => {
    const def = defineFlow(base);
    expect(def.persistence).toEqual({ backend: 'memory', mode: 'snapshots' });
    expect(def.timers).toEqual({
      fireEvery: 60_000,
      persistEvery: 60_000,
      unload: undefined,
      flushOnRevoke: false,
      ignorePersistErrors: false,
    });
    expect(def.onDecodeFailure).toBe('fail');
    expect(def.valueCodec.decode(Buffer.from('{"a":1}'))).toEqual({ a: 1 });
  });

  test('dead-letter policies: a topic per input topic, and a memory-backed or transient flow is refused at definition time', () => {
    const base = { name: 'f', groupId: 'g', topics: ['a', 'b'], fold: () => 1 };
    const kafka = defineFlow({ ...base, persistence: { backend: 'kafka', transactional: true }, onFoldFailure: 'dead-letter' });
    expect(kafka.onFoldFailure).toBe('dead-letter');
    expect(kafka.deadLetterTopics).toEqual({ a: 'g-f-a-dead-letters', b: 'g-f-b-dead-letters' });
    const named = defineFlow({ ...base, persistence: { backend: 'kafka' }, onDecodeFailure: 'dead-letter', deadLetterTopic: (t) => `${t}.dlq` });
    expect(named.deadLetterTopics).toEqual({ a: 'a.dlq', b: 'b.dlq' });
    expect(defineFlow({ ...base, onFoldFailure: 'skip' }).deadLetterTopics).toBeUndefined();
    expect(() => defineFlow({ ...base, onDecodeFailure: 'dead-letter' })).toThrow(ConfigError);
    expect(() => defineFlow({ ...base, onFoldFailure: 'dead-letter' })).toThrow(/onFoldFailure: 'dead-letter' needs persistence to Kafka or Cassandra/);
    expect(() => defineFlow({ ...base, persistence: { backend: 'kafka', mode: 'none' }, onFoldFailure: 'dead-letter' })).toThrow(/mode 'none'/);
    expect(() => defineFlow({ ...base, onFoldFailure: 'retry' as never })).toThrow(/onFoldFailure/);
  });

  test('outputs: topics, codec and outputEvery (default JSON, 1 s); memory-backed or transient flows and bad values are refused', () => {
    const kafka = { ...base, persistence: { backend: 'kafka' as const, transactional: true } };
    const def = defineFlow({ ...kafka, outputTopics: ['alerts', 'alerts'] });
    expect(def.outputTopics).toEqual(['alerts']);
    expect(def.outputEveryMs).toBe(1000);
    expect(def.outputCodec.encode({ a: 1 }).toString()).toBe('{"a":1}');
    expect(defineFlow(base).outputTopics).toEqual([]);
    expect(defineFlow({ ...kafka, outputTopics: ['a'], outputEvery: '250ms' }).outputEveryMs).toBe(250);
    expect(() => defineFlow({ ...base, outputTopics: ['a'] })).toThrow(/outputTopics needs persistence to Kafka or Cassandra/);
    expect(() => defineFlow({ ...kafka, persistence: { backend: 'kafka', mode: 'none' }, outputTopics: ['a'] })).toThrow(/mode 'none'/);
    expect(() => defineFlow({ ...kafka, outputTopics: [''] })).toThrow(ConfigError);
    expect(() => defineFlow({ ...kafka, outputCodec: { decode: () => 1 } as never })).toThrow(/outputCodec must have an encode function/);
    expect(() => defineFlow({ ...kafka, outputEvery: 0 })).toThrow(/outputEvery must be more than 0/);
    expect(() => defineFlow({ ...kafka, outputEvery: 'soon' })).toThrow(/outputEvery must be a duration/);
  });

  test('onTimer and stateTtl: snapshot modes of any backend; a journal mode is refused; stateTtl a duration or { after, time }', () => {
    const onTimer = (s: number) => s;
    expect(defineFlow({ ...base, onTimer }).onTimer).toBe(onTimer);
    expect(defineFlow({ ...base, stateTtl: '30s' }).stateTtl).toEqual({ ms: 30_000, time: 'processing' });
    expect(defineFlow({ ...base, stateTtl: { after: '1m', time: 'event' }, allowedLateness: '5s' })).toMatchObject({
      stateTtl: { ms: 60_000, time: 'event' },
      allowedLatenessMs: 5_000,
    });
    expect(defineFlow({ ...base }).stateTtl).toBeUndefined();
    const cassandra = { backend: 'cassandra' as const, keyspace: 'k', applicationId: 'a' };
    expect(defineFlow({ ...base, onTimer, persistence: { ...cassandra, mode: 'snapshots' } }).onTimer).toBe(onTimer);
    expect(() => defineFlow({ ...base, onTimer, persistence: { ...cassandra, mode: 'journal' } })).toThrow(/onTimer needs mode 'snapshots'/);
    expect(() => defineFlow({ ...base, stateTtl: '1m', persistence: { ...cassandra, mode: 'journal+snapshots' } })).toThrow(ConfigError);
    expect(() => defineFlow({ ...base, stateTtl: 0 })).toThrow(/stateTtl must be more than 0/);
    expect(() => defineFlow({ ...base, stateTtl: { after: '1m', time: 'wall' as never } })).toThrow(/stateTtl/);
    expect(() => defineFlow({ ...base, onTimer: 'x' as never })).toThrow(/onTimer must be a function/);
  });

  test('maxPendingOutputs: 10,000 a partition unless set; a positive integer or ConfigError naming it', () => {
    const kafka = { ...base, persistence: { backend: 'kafka' as const, transactional: true }, outputTopics: ['a'] };
    expect(defineFlow(kafka).maxPendingOutputs).toBe(10_000);
    expect(defineFlow({ ...kafka, maxPendingOutputs: 1 }).maxPendingOutputs).toBe(1);
    for (const bad of [0, -5, 2.5, '100' as never]) {
      expect(() => defineFlow({ ...kafka, maxPendingOutputs: bad })).toThrow(/maxPendingOutputs: /);
    }
  });

  test('stateCache: none unless set; maxKeys a positive integer, maxBytes an integer >= 200, at least one, or ConfigError naming it', () => {
    expect(defineFlow(base).stateCache).toBeUndefined();
    expect(defineFlow({ ...base, stateCache: { maxKeys: 1000 } }).stateCache).toEqual({ maxKeys: 1000 });
    expect(defineFlow({ ...base, stateCache: { maxBytes: 1 << 30 } }).stateCache).toEqual({ maxBytes: 1 << 30 });
    expect(defineFlow({ ...base, stateCache: { maxKeys: 10, maxBytes: 4096 } }).stateCache).toEqual({ maxKeys: 10, maxBytes: 4096 });
    for (const bad of [0, -1, 2.5, '10' as never]) expect(() => defineFlow({ ...base, stateCache: { maxKeys: bad } })).toThrow(/stateCache\.maxKeys: /);
    for (const bad of [5, 199, 2.5e3 + 0.5, '4096' as never]) expect(() => defineFlow({ ...base, stateCache: { maxBytes: bad } })).toThrow(/stateCache\.maxBytes: /);
    expect(() => defineFlow({ ...base, stateCache: {} })).toThrow(/stateCache: needs maxKeys, maxBytes or both/);
    expect(() => defineFlow({ ...base, stateCache: { maxKeys: 10, maxEntries: 5 } as never })).toThrow(/stateCache: /);
  });

  test('consumer.rebalance: cooperative unless set; eager or cooperative, else ConfigError naming it', () => {
    expect(defineFlow(base).consumer.rebalance).toBe('cooperative');
    expect(defineFlow({ ...base, consumer: { rebalance: 'eager' } }).consumer.rebalance).toBe('eager');
    expect(() => defineFlow({ ...base, consumer: { rebalance: 'sticky' as never } })).toThrow(/consumer.rebalance/);
  });

  test('standbyReplicas: 0 unless set; an integer >= 0 or ConfigError naming it', () => {
    expect(defineFlow(base).standbyReplicas).toBe(0);
    expect(defineFlow({ ...base, standbyReplicas: 2 }).standbyReplicas).toBe(2);
    for (const bad of [-1, 1.5, '1' as never]) expect(() => defineFlow({ ...base, standbyReplicas: bad })).toThrow(/standbyReplicas: /);
  });

  test('idleFlush: 250 ms of quiet unless set; a duration, or false for none; anything else is a ConfigError naming it', () => {
    expect(defineFlow(base).idleFlushMs).toBe(250);
    expect(defineFlow({ ...base, idleFlush: '2s' }).idleFlushMs).toBe(2000);
    expect(defineFlow({ ...base, idleFlush: 0 }).idleFlushMs).toBe(0);
    expect(defineFlow({ ...base, idleFlush: false }).idleFlushMs).toBeUndefined();
    for (const bad of [true as never, -1, 'later']) expect(() => defineFlow({ ...base, idleFlush: bad })).toThrow(/idleFlush/);
  });

  test('kafka persistence defaults and duration parsing', () => {
    const def = defineFlow({
      ...base,
      persistence: { backend: 'kafka', transactional: true, snapshotTopic: 'sales-snapshots', acks: -1 },
      timers: { persistPeriodically: { fireEvery: '1s', persistEvery: '2 min' }, unloadOrphaned: { maxIdle: '10m' } },
    });
    expect(def.persistence).toEqual({
      backend: 'kafka',
      mode: 'snapshots',
      transactional: true,
      maxWritesPerTransaction: 2048,
      recoveryStallTimeoutMs: 180_000,
      snapshotTopic: 'sales-snapshots',
      compressionThreshold: 10_000,
      options: { acks: -1 },
    });
    expect(def.timers).toMatchObject({ fireEvery: 1_000, persistEvery: 120_000, unload: { maxIdle: 600_000, maxOffsetDifference: 100_000 } });
  });

  test.each([
    [{ ...base, topics: [] }, /topics/],
    [{ ...base, fold: 'nope' }, /fold: fold must be a function/],
    [{ ...base, name: '' }, /name/],
    [{ ...base, persistence: { backend: 'redis' } }, /persistence/],
    [{ ...base, persistence: { backend: 'kafka', maxWritesPerTransaction: 0 } }, /maxWritesPerTransaction/],
    [{ ...base, timers: { persistPeriodically: { fireEvery: -1 } } }, /fireEvery/],
    [{ ...base, timers: { persistPeriodically: { fireEvery: 'soon' } } }, /fireEvery/],
    [{ ...base, onDecodeFailure: 'ignore' }, /onDecodeFailure/],
    [{ ...base, typo: true }, /typo/],
  ])('rejects an invalid definition with ConfigError (%#)', (options, message) => {
    let error: unknown;
    try {
      defineFlow(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe('CONFIG');
    expect((error as Error).message).toMatch(message);
  });
});
