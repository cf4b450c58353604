// The Cassandra backend's pure parts: kafka-flow's segment rule, the fence's next step, option
// resolution, schema checks, and bounded concurrency.
import fc from 'fast-check';
import { ConfigError } from '../../../../config/errors';
import { defineFlow } from '../../../../define-flow';
import {
  AdaptiveLimiter,
  columnProblems,
  javaStringHashCode,
  journalPurgeStep,
  keySegment,
  Lanes,
  Limiter,
  mapConcurrent,
  nextStep,
  resolveCassandraOptions,
  schemaCql,
  segmentChunks,
  TABLE_SPECS,
} from '../../../../persistence/cassandra';

describe('key segments: kafka-flow\'s abs(String.hashCode % segments)', () => {
  test.each([
    ['', 0],
    ['a', 97],
    ['hello', 99162322],
    ['polygenelubricants', -2147483648], // Integer.MIN_VALUE
    ['😀', 1772899], // two UTF-16 code units, as Java counts them
    ['Aa', 2112],
    ['BB', 2112],
  ])('hashCode(%j) = %d, as Java computes it', (s, h) => {
    expect(javaStringHashCode(s)).toBe(h);
  });

  test('segments as kafka-flow computes them, negatives folded like Java\'s % then abs', () => {
    expect(keySegment('hello', 10_000)).toBe(2322);
    expect(keySegment('polygenelubricants', 10_000)).toBe(3648);
    expect(keySegment('anything', 1)).toBe(0);
  });

  test('every segment is in range', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.integer({ min: 1, max: 2_147_483_647 }), (key, segments) => {
        const s = keySegment(key, segments);
        return Number.isInteger(s) && s >= 0 && s < segments;
      }),
    );
  });

  test('chunks cover every segment once', () => {
    expect(segmentChunks(7, 3)).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
    const chunks = segmentChunks(10_000, 100);
    expect(chunks).toHaveLength(100);
    expect(chunks.flat()).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
  });
});

describe('the fence\'s next step after a refused statement', () => {
  const put = (generation: number | undefined, offset: number) => ({ kind: 'put' as const, generation, offset });
  const del = (generation: number | undefined, offset: number) => ({ kind: 'delete' as const, generation, offset });

  test('no row: a put inserts, a delete inserts its marker, a purge is done', () => {
    expect(nextStep(undefined, put(2, 10))).toEqual({ step: 'insert' });
    expect(nextStep(undefined, del(2, 10))).toEqual({ step: 'insert' });
    expect(nextStep(undefined, { kind: 'purge', generation: 2, offset: 10 })).toEqual({ step: 'done' });
  });

  test('a newer generation refuses whatever the offsets', () => {
    expect(nextStep({ generation: 3, offset: 5 }, put(2, 10))).toMatchObject({ step: 'refuse' });
    expect(nextStep({ generation: 3, offset: 50 }, del(2, 10))).toMatchObject({ step: 'refuse', reason: expect.stringMatching(/generation 3/) });
  });

  test('an older (or no) generation is taken over by compare-and-set on what is stored', () => {
    expect(nextStep({ generation: 1, offset: 50 }, put(2, 10))).toEqual({ step: 'cas', expected: { generation: 1, offset: 50 } });
    expect(nextStep({ generation: null, offset: 50 }, del(2, 10))).toEqual({ step: 'cas', expected: { generation: null, offset: 50 } });
  });

  test('the same generation (or none at all) compares offsets; a put at its own offset over a value row rewrites it (a timer fire, or its own write again)', () => {
    for (const g of [2, undefined]) {
      expect(nextStep({ generation: g ?? null, offset: 10, marker: false }, put(g, 10))).toEqual({ step: 'cas', expected: { generation: g ?? null, offset: 10, marker: false } });
      expect(nextStep({ generation: g ?? null, offset: 11 }, put(g, 10))).toMatchObject({ step: 'refuse', by: 'offset' });
      expect(nextStep({ generation: g ?? null, offset: 9 }, put(g, 10))).toEqual({ step: 'conditional' });
      expect(nextStep({ generation: g ?? null, offset: 10 }, del(g, 10))).toEqual({ step: 'conditional' });
      expect(nextStep({ generation: g ?? null, offset: 11 }, del(g, 10))).toMatchObject({ step: 'refuse', by: 'offset' });
    }
    // Offsets only: a stored generation is not looked at.
    expect(nextStep({ generation: 9, offset: 9 }, put(undefined, 10))).toEqual({ step: 'conditional' });
  });

  test('the order is (generation, offset): a write lands exactly when it is newer', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 20 }),
        (sg, so, g, o) => {
          const step = nextStep({ generation: sg, offset: so, marker: false }, put(g, o)).step;
          const newer = g > sg || (g === sg && o > so);
          const same = g === sg && o === so;
          if (same) return step === 'cas';
          return newer ? step === 'cas' || step === 'conditional' : step === 'refuse';
        },
      ),
    );
  });
});

describe('a refused put at its own offset: rewritten only over a value row', () => {
  const put = (generation: number | undefined, offset: number) => ({ kind: 'put' as const, generation, offset });

  test('a delete marker at the same offset, within the generation (or without one), refuses by marker: not done, not a fence', () => {
    for (const g of [4, undefined]) {
      expect(nextStep({ generation: g ?? null, offset: 10, marker: true }, put(g, 10))).toMatchObject({
        step: 'refuse',
        by: 'marker',
        reason: expect.stringMatching(/delete marker .* offset 10/),
      });
    }
  });

  test('an answer that does not say whether the row holds a value (a conditional UPDATE\'s) asks for a read', () => {
    expect(nextStep({ generation: 4, offset: 10 }, put(4, 10))).toEqual({ step: 'read' });
    // Only the same offset needs to know: otherwise the offsets decide.
    expect(nextStep({ generation: 4, offset: 9 }, put(4, 10))).toEqual({ step: 'conditional' });
    expect(nextStep({ generation: 4, offset: 11 }, put(4, 10))).toMatchObject({ step: 'refuse', by: 'offset' });
  });

  test('a marker of an older generation at the same offset is taken over; of a newer one, a fence', () => {
    expect(nextStep({ generation: 3, offset: 10, marker: true }, put(4, 10))).toEqual({ step: 'cas', expected: { generation: 3, offset: 10, marker: true } });
    expect(nextStep({ generation: 5, offset: 10, marker: true }, put(4, 10))).toMatchObject({ step: 'refuse', by: 'generation' });
  });

  test('only a newer generation refuses by generation: every refusal by offset or marker is within the writer\'s own generation (or without one)', () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 0, max: 4 }), { nil: null }),
        fc.integer({ min: 0, max: 12 }),
        fc.option(fc.boolean(), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
        fc.integer({ min: 0, max: 12 }),
        fc.constantFrom('put' as const, 'delete' as const, 'purge' as const),
        (sg, so, marker, g, o, kind) => {
          const step = nextStep({ generation: sg, offset: so, marker }, { kind, generation: g, offset: o });
          if (step.step !== 'refuse') return true;
          if (step.by === 'generation') return g !== undefined && sg !== null && sg > g;
          return g === undefined || sg === g;
        },
      ),
    );
  });
});

describe('a row whose cells all expired (offset null)', () => {
  test('is taken over by compare-and-set on exactly what it is, whatever the write', () => {
    for (const kind of ['put', 'delete', 'purge'] as const) {
      expect(nextStep({ generation: null, offset: null }, { kind, generation: 2, offset: 5 })).toEqual({ step: 'cas', expected: { generation: null, offset: null } });
      expect(nextStep({ generation: null, offset: null }, { kind, generation: undefined, offset: 5 })).toEqual({ step: 'cas', expected: { generation: null, offset: null } });
    }
  });
});

describe("a journal's fenced purge after its conditional batch was refused", () => {
  test('a newer generation has appended: fenced; none (or no journal): on generation = null; not newer: again', () => {
    expect(journalPurgeStep(5, 4)).toMatchObject({ step: 'fenced', reason: expect.stringMatching(/generation 5 .* generation 4/) });
    expect(journalPurgeStep(null, 4)).toEqual({ step: 'retry', expected: 'none' });
    expect(journalPurgeStep(undefined, 4)).toEqual({ step: 'retry', expected: 'none' });
    expect(journalPurgeStep(4, 4)).toEqual({ step: 'retry', expected: 'not-newer' });
    expect(journalPurgeStep(3, 4)).toEqual({ step: 'retry', expected: 'not-newer' });
  });

  test('fenced exactly when a newer generation wrote', () => {
    fc.assert(
      fc.property(fc.option(fc.integer({ min: 0, max: 9 }), { nil: null }), fc.integer({ min: 0, max: 9 }), (stored, g) => {
        return (journalPurgeStep(stored, g).step === 'fenced') === (stored !== null && stored > g);
      }),
    );
  });
});

describe('options', () => {
  test('defaults are kafka-flow\'s, with the fence on', () => {
    const r = resolveCassandraOptions({}, 'sales');
    expect(r).toMatchObject({
      keyspace: 'kafka_flow',
      applicationId: 'sales',
      tables: { snapshots: 'snapshots_v2', keys: 'keys', journals: 'records' },
      keySegments: 10_000,
      fencing: 'lwt',
      serialConsistency: 'SERIAL',
      ttlSeconds: { snapshots: 0, keys: 0, journals: 0 },
      fenceRowTtlSeconds: 86_400,
      fenceEpoch: 0,
      consistency: { snapshots: { read: 'LOCAL_QUORUM', write: 'LOCAL_QUORUM' } },
      replication: { class: 'SimpleStrategy', replication_factor: 1 },
    });
  });

  test('durations become TTL seconds, overrides apply per table', () => {
    const r = resolveCassandraOptions(
      { ttl: { snapshots: '7d', keys: 1500 }, consistency: { keys: { read: 'ONE' } }, applicationId: 'app', fencing: 'none' },
      'sales',
    );
    expect(r.ttlSeconds).toEqual({ snapshots: 604_800, keys: 2, journals: 0 });
    expect(r.consistency.keys).toEqual({ read: 'ONE', write: 'LOCAL_QUORUM' });
    expect(r.applicationId).toBe('app');
    expect(r.fencing).toBe('none');
  });

  test.each([
    [{ fencing: 'maybe' }, /fencing/],
    [{ keySegments: 0 }, /keySegments/],
    [{ tables: { snapshots: 'Snap-shots' } }, /tables\.snapshots/],
    [{ tables: { keys: 'same', journals: 'same' } }, /three different names/],
    [{ ttl: { snapshots: '8000d' } }, /at most 630720000/],
    [{ ttl: { snapshots: 'soon' } }, /persistence\.ttl\.snapshots/],
    [{ consistency: { keys: { read: 'SERIAL' } } }, /consistency\.keys\.read/],
    [{ replication: { replication_factor: 3 } }, /class/],
    [{ colour: 'blue' }, /colour/],
    [{ fenceEpoch: -1 }, /fenceEpoch/],
    [{ fencing: 'timestamp', fenceEpoch: 16 }, /fenceEpoch: at most 15 with fencing 'timestamp'/],
    [{ fencing: 'paxos' }, /fencing/],
  ])('%j is refused with a ConfigError naming it', (options, message) => {
    expect(() => resolveCassandraOptions(options as never, 'sales')).toThrow(ConfigError);
    expect(() => resolveCassandraOptions(options as never, 'sales')).toThrow(message);
  });

  test('defineFlow validates the cassandra options (strictly) and keeps them', () => {
    const base = { name: 'sales', groupId: 'sales', topics: ['sales'], fold: () => undefined };
    const def = defineFlow({ ...base, persistence: { backend: 'cassandra', fencing: 'none', keySegments: 100, ttl: { snapshots: '1d' } } });
    expect(def.persistence).toEqual({
      backend: 'cassandra',
      mode: 'snapshots',
      compressionThreshold: 10_000,
      options: { fencing: 'none', keySegments: 100, ttl: { snapshots: '1d' } },
    });
    expect(() => defineFlow({ ...base, persistence: { backend: 'cassandra', fencng: 'none' } as never })).toThrow(/fencng/);
    expect(() => defineFlow({ ...base, persistence: { backend: 'cassandra', fencing: 'off' } as never })).toThrow(/persistence\.fencing/);
  });
});

describe('schema', () => {
  // As system_schema.columns has them: key columns numbered from 0 within their kind.
  const found = (spec: (typeof TABLE_SPECS)['snapshots']) =>
    new Map(
      spec.columns.map((c) => {
        const position = c.kind === 'regular' ? -1 : spec.columns.filter((o) => o.kind === c.kind).indexOf(c);
        return [c.name, { type: c.type, kind: c.kind, position }] as const;
      }),
    );

  test('the created tables fit their own check; extra columns are fine', () => {
    for (const spec of Object.values(TABLE_SPECS)) {
      const columns = found(spec);
      columns.set('extra', { type: 'text', kind: 'regular', position: -1 });
      expect(columnProblems(spec, columns)).toEqual({ problems: [], missingGeneration: false });
    }
  });

  test('kafka-flow\'s snapshots table lacks only the generation column', () => {
    const columns = found(TABLE_SPECS.snapshots);
    columns.delete('generation');
    expect(columnProblems(TABLE_SPECS.snapshots, columns)).toEqual({ problems: [], missingGeneration: true });
  });

  test("kafka-flow's journals table lacks only the (static) generation column; a regular one is named", () => {
    const columns = found(TABLE_SPECS.journals);
    columns.delete('generation');
    expect(columnProblems(TABLE_SPECS.journals, columns)).toEqual({ problems: [], missingGeneration: true });
    columns.set('generation', { type: 'bigint', kind: 'regular', position: -1 });
    expect(columnProblems(TABLE_SPECS.journals, columns).problems).toEqual(['column generation is regular, needs static']);
    expect(schemaCql({ keyspace: 'ks', replication: { class: 'SimpleStrategy', replication_factor: 1 }, tables: { snapshots: 's', keys: 'k', journals: 'j' }, autoCreate: false }, ['journals'])[1]).toMatch(
      /generation BIGINT STATIC,\n {2}PRIMARY KEY\(\(application_id, group_id, topic, partition, key\), offset\)/,
    );
  });

  test('wrong types, missing columns and another primary key are named', () => {
    const columns = found(TABLE_SPECS.keys);
    columns.set('created', { type: 'text', kind: 'regular', position: -1 });
    columns.delete('metadata');
    columns.set('segment', { type: 'bigint', kind: 'clustering', position: 2 });
    columns.set('key', { type: 'text', kind: 'clustering', position: 3 });
    const { problems } = columnProblems(TABLE_SPECS.keys, columns);
    expect(problems).toEqual([
      'column created is text, needs timestamp',
      'column metadata (text) is missing',
      'partition key is (application_id, group_id), needs (application_id, group_id, segment)',
      'clustering columns is (topic, partition, segment, key), needs (topic, partition, key)',
    ]);
  });

  test('schemaCql: the statements to create ahead of time', () => {
    const cql = schemaCql(
      { keyspace: 'ks', replication: { class: 'NetworkTopologyStrategy', dc1: 3 }, tables: { snapshots: 's', keys: 'k', journals: 'j' }, autoCreate: false },
      ['snapshots', 'keys'],
    );
    expect(cql[0]).toBe("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'}");
    expect(cql[1]).toMatch(/^CREATE TABLE IF NOT EXISTS ks\.s \([\s\S]*PRIMARY KEY\(\(application_id, group_id, topic, partition, key\)\)\n\)$/);
    expect(cql[2]).toMatch(/PRIMARY KEY\(\(application_id, group_id, segment\), topic, partition, key\)\n\)\nWITH compaction/);
    expect(cql[3]).toBe('CREATE INDEX IF NOT EXISTS k_created_date_idx ON ks.k (created_date)');
    expect(cql).toHaveLength(4);
  });
});

describe('bounded concurrency', () => {
  const tick = () => new Promise((r) => setTimeout(r, 1));

  test('a Limiter never runs more than its slots, and runs everything', async () => {
    const limiter = new Limiter(3);
    let running = 0;
    let peak = 0;
    const done = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        limiter.run(async () => {
          running++;
          peak = Math.max(peak, running);
          await tick();
          running--;
          if (i === 7) throw new Error('one fails');
          return i;
        }).catch(() => -1),
      ),
    );
    expect(peak).toBe(3);
    expect(done.filter((d) => d === -1)).toHaveLength(1);
    expect(limiter.running).toBe(0);
    expect(limiter.queued).toBe(0);
  });

  test('an AdaptiveLimiter halves its bound on overload (once per window, not below 1), regains one per bound successes, and never runs more than its bound', async () => {
    let now = 0;
    const limiter = new AdaptiveLimiter(8, 250, () => now);
    limiter.overloaded();
    limiter.overloaded(); // the same overload (within 250 ms): one halving
    expect(limiter.limit).toBe(4);
    for (const t of [300, 600, 900, 1200]) {
      now = t;
      limiter.overloaded();
    }
    expect(limiter.limit).toBe(1);
    // One more success than the bound lifts it by one each time: 1 → 2 after 1, → 3 after 2 more.
    limiter.succeeded();
    expect(limiter.limit).toBe(2);
    limiter.succeeded();
    limiter.succeeded();
    expect(limiter.limit).toBe(3);

    let running = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 30 }, () =>
        limiter.run(async () => {
          running++;
          peak = Math.max(peak, running);
          await tick();
          running--;
        }),
      ),
    );
    expect(peak).toBe(3);
    for (let i = 0; i < 100; i++) limiter.succeeded();
    expect(limiter.limit).toBe(8);
    expect(limiter.running).toBe(0);
    expect(limiter.queued).toBe(0);
  });

  test('Lanes run one task at a time per lane, in arrival order, lanes side by side, a failure passing the lane on', async () => {
    const lanes = new Lanes();
    const running = new Map<string, number>();
    const peak = new Map<string, number>();
    const order: string[] = [];
    let together = 0;
    let mostTogether = 0;
    const task = (lane: string, i: number) =>
      lanes.run(lane, async () => {
        running.set(lane, (running.get(lane) ?? 0) + 1);
        peak.set(lane, Math.max(peak.get(lane) ?? 0, running.get(lane)!));
        mostTogether = Math.max(mostTogether, ++together);
        order.push(`${lane}${i}`);
        await tick();
        together--;
        running.set(lane, running.get(lane)! - 1);
        if (i === 2) throw new Error('one fails');
        return i;
      });
    const done = await Promise.all(Array.from({ length: 12 }, (_, i) => task(i % 3 === 0 ? 'a' : i % 3 === 1 ? 'b' : 'c', Math.floor(i / 3)).catch(() => -1)));
    expect([...peak.values()]).toEqual([1, 1, 1]);
    expect(mostTogether).toBe(3);
    expect(order.filter((o) => o.startsWith('a'))).toEqual(['a0', 'a1', 'a2', 'a3']);
    expect(done.filter((d) => d === -1)).toHaveLength(3);
    expect(lanes.busy).toBe(0);
  });

  test('mapConcurrent yields every result with at most N in flight, and throws the first failure after the rest settle', async () => {
    let running = 0;
    let peak = 0;
    const work = async (n: number) => {
      running++;
      peak = Math.max(peak, running);
      await tick();
      running--;
      return n * 2;
    };
    const out: number[] = [];
    for await (const r of mapConcurrent(Array.from({ length: 40 }, (_, i) => i), 4, work)) out.push(r);
    expect(out.sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
    expect(peak).toBe(4);

    async function* source() {
      for (let i = 0; i < 100; i++) yield i;
    }
    let settledAfterFailure = 0;
    const failing = async () => {
      for await (const _ of mapConcurrent(source(), 5, async (n) => {
        await tick();
        if (n === 3) throw new Error('boom at 3');
        settledAfterFailure++;
        return n;
      })) {
        // consume
      }
    };
    await expect(failing()).rejects.toThrow('boom at 3');
    expect(running).toBe(0);
    expect(settledAfterFailure).toBeLessThan(20); // it stopped pulling from the source
  });
});
