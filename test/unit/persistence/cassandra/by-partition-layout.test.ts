// The by-partition layout's pure parts: the key's bucket (a well-defined hash, the same in every
// process), the table comment that records the bucket count, the options' validation, the
// table's schema, and the bounded merge that scans buckets.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import fc from 'fast-check';
import { ConfigError } from '../../../../config/errors';
import { defineFlow } from '../../../../define-flow';
import {
  bucketsComment,
  bucketsFromComment,
  columnProblems,
  keyBucket,
  mergeConcurrent,
  resolveCassandraOptions,
  schemaCql,
  snapshotsByPartitionTable,
} from '../../../../persistence/cassandra';

describe('keyBucket: uint32 BE of MD5(UTF-8 key)[0..4] mod buckets', () => {
  // Expected values computed independently (Python's hashlib), so the rule is pinned, not our code.
  test.each([
    ['', 3558706393],
    ['a', 214005177],
    ['key-1', 565144459],
    ['polygenelubricants', 451356301],
    ['ключ', 3278207846],
    ['🙂 emoji', 3960903111],
  ])('%j', (key, hash) => {
    for (const buckets of [1, 16, 256, 65_536, 1000]) expect(keyBucket(key, buckets)).toBe(hash % buckets);
  });

  test('the same in another process', () => {
    const keys = ['a', 'key-1', 'ключ', '🙂 emoji', 'x'.repeat(1000)];
    const root = path.resolve(__dirname, '../../../..');
    const script = `require('./bin/ts-loader.js'); const { keyBucket } = require('./persistence/cassandra/buckets.ts'); process.stdout.write(JSON.stringify(${JSON.stringify(keys)}.map((k) => keyBucket(k, 256))));`;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual(keys.map((k) => keyBucket(k, 256)));
  });

  test('in range, and spread evenly', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.integer({ min: 1, max: 65_536 }), (key, buckets) => {
        const b = keyBucket(key, buckets);
        return Number.isInteger(b) && b >= 0 && b < buckets;
      }),
    );
    const counts = new Array(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[keyBucket(`k${i}`, 16)]++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
  });
});

test('the table comment records the bucket count and nothing else passes for one', () => {
  expect(bucketsComment(256)).toBe('kafka-flow-temporal snapshots by partition; buckets=256');
  expect(bucketsFromComment(bucketsComment(256))).toBe(256);
  expect(bucketsFromComment(bucketsComment(1))).toBe(1);
  for (const other of ['', null, undefined, 'buckets=256', 'kafka-flow-temporal snapshots by partition; buckets=', 'kafka-flow-temporal snapshots by partition; buckets=12x']) {
    expect(bucketsFromComment(other)).toBeUndefined();
  }
});

describe('options', () => {
  const base = { name: 'sales', groupId: 'sales', topics: ['sales'], fold: () => undefined };

  test('layout by-partition: buckets default 256, its own default table, kafka-flow layout unchanged', () => {
    const bp = resolveCassandraOptions({ layout: 'by-partition' }, 'app');
    expect(bp).toMatchObject({ layout: 'by-partition', buckets: 256, tables: { snapshots: 'snapshots_by_partition', keys: 'keys', journals: 'records' } });
    expect(resolveCassandraOptions({ layout: 'by-partition', buckets: 16, tables: { snapshots: 'mine' } }, 'app')).toMatchObject({ buckets: 16, tables: { snapshots: 'mine' } });
    expect(resolveCassandraOptions({}, 'app')).toMatchObject({ layout: 'kafka-flow', buckets: 0, tables: { snapshots: 'snapshots_v2' } });
    const def = defineFlow({ ...base, persistence: { backend: 'cassandra', layout: 'by-partition', buckets: 64 } });
    expect(def.persistence).toMatchObject({ mode: 'snapshots', options: { layout: 'by-partition', buckets: 64 } });
  });

  test('invalid combinations are ConfigErrors naming the option', () => {
    const invalid = (p: object) => () => defineFlow({ ...base, persistence: { backend: 'cassandra', ...p } as never });
    expect(invalid({ layout: 'clustered' })).toThrow(/persistence\.layout/);
    expect(invalid({ layout: 'by-partition', buckets: 0 })).toThrow(/persistence\.buckets/);
    expect(invalid({ layout: 'by-partition', buckets: 65_537 })).toThrow(/persistence\.buckets/);
    expect(invalid({ layout: 'by-partition', buckets: 1.5 })).toThrow(/persistence\.buckets/);
    expect(invalid({ buckets: 16 })).toThrow(ConfigError);
    expect(invalid({ buckets: 16 })).toThrow(/buckets \(16\) applies to layout 'by-partition' only/);
    expect(invalid({ layout: 'by-partition', mode: 'journal' })).toThrow(/mode 'journal' has none/);
    expect(() => resolveCassandraOptions({ buckets: 16 }, 'app')).toThrow(ConfigError);
  });
});

describe('schema', () => {
  test('the by-partition table: bucket in the partition key, key clustering, the count in its comment; it fits its own check', () => {
    const spec = snapshotsByPartitionTable(32);
    const found = new Map(
      spec.columns.map((c) => [c.name, { type: c.type, kind: c.kind, position: c.kind === 'regular' ? -1 : spec.columns.filter((o) => o.kind === c.kind).indexOf(c) }] as const),
    );
    expect(columnProblems(spec, found)).toEqual({ problems: [], missingGeneration: false });
    const cql = schemaCql(
      { keyspace: 'ks', replication: { class: 'SimpleStrategy', replication_factor: 1 }, tables: { snapshots: 's', keys: 'k', journals: 'j' }, autoCreate: false, layout: 'by-partition', buckets: 32 },
      ['snapshots'],
    );
    expect(cql).toHaveLength(2);
    expect(cql[1]).toMatch(/^CREATE TABLE IF NOT EXISTS ks\.s \([\s\S]* bucket INT,\n {2}key TEXT,[\s\S]*PRIMARY KEY\(\(application_id, group_id, topic, partition, bucket\), key\)\n\)\nWITH comment = 'kafka-flow-temporal snapshots by partition; buckets=32'$/);
    // kafka-flow's table is not the by-partition one.
    const kafkaFlowCql = schemaCql({ keyspace: 'ks', replication: { class: 'SimpleStrategy', replication_factor: 1 }, tables: { snapshots: 's', keys: 'k', journals: 'j' }, autoCreate: false }, ['snapshots']);
    expect(kafkaFlowCql[1]).toMatch(/PRIMARY KEY\(\(application_id, group_id, topic, partition, key\)\)\n\)$/);
  });
});

describe('mergeConcurrent', () => {
  const tick = () => new Promise((r) => setTimeout(r, 1));

  test('every item of every source, at most `concurrency` sources open at once', async () => {
    let open = 0;
    let peak = 0;
    async function* source(id: number, n: number) {
      open++;
      peak = Math.max(peak, open);
      try {
        for (let i = 0; i < n; i++) {
          await tick();
          yield `${id}:${i}`;
        }
      } finally {
        open--;
      }
    }
    const sources = Array.from({ length: 10 }, (_, id) => source(id, id));
    const out: string[] = [];
    for await (const item of mergeConcurrent(sources, 3)) out.push(item);
    expect(out.sort()).toEqual(Array.from({ length: 10 }, (_, id) => Array.from({ length: id }, (_, i) => `${id}:${i}`)).flat().sort());
    expect(peak).toBe(3);
    expect(open).toBe(0);
  });

  test('reads at most one item ahead of the consumer per source', async () => {
    let produced = 0;
    async function* source() {
      for (let i = 0; i < 100; i++) {
        produced++;
        yield i;
      }
    }
    const it = mergeConcurrent([source(), source()], 2)[Symbol.asyncIterator]();
    await it.next();
    await tick();
    expect(produced).toBeLessThanOrEqual(3);
    await it.return?.(undefined);
  });

  test('a failing source fails the merge, and the sources still open are closed', async () => {
    let closed = 0;
    async function* endless() {
      try {
        for (;;) {
          await tick();
          yield 1;
        }
      } finally {
        closed++;
      }
    }
    async function* failing() {
      await tick();
      yield 2;
      await tick();
      throw new Error('boom');
    }
    await expect(
      (async () => {
        for await (const _ of mergeConcurrent([endless(), failing(), endless()], 3)) {
          // consume
        }
      })(),
    ).rejects.toThrow('boom');
    expect(closed).toBe(2);
  });
});
