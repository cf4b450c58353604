// A key's pending timers (onTimer, stateTtl) ride in the snapshot row's `metadata` column on the
// real Cassandra, under every fencing and both layouts: written with the snapshot (each of the
// statements a write may take: insert, conditional update, plain, by timestamp), a fire's rewrite
// of the state at the same offset landing under 'lwt' too, read back by
// recovery and by a single read, dropped when the key is written without them; a row kafka-flow
// wrote (metadata '') or with another writer's text in it has none.
import { cassandraScope, closeAll } from '../../support/servers';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import type { KeyTimer } from '../../../core/persistence-types';
import { startBackend } from './support';

const cassandra = cassandraScope('kft_key_timers');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };
const close: KeyTimer = { name: 'close', at: 1_767_225_630_000, time: 'event' };
const ttl: KeyTimer = { name: 'kafka-flow:ttl', at: 1_767_226_200_000, time: 'processing' };

describe.each([
  { fencing: 'lwt' as const, layout: 'kafka-flow' as const },
  { fencing: 'none' as const, layout: 'kafka-flow' as const },
  { fencing: 'timestamp' as const, layout: 'by-partition' as const },
  { fencing: 'lwt' as const, layout: 'by-partition' as const },
])('fencing $fencing, layout $layout', ({ fencing, layout }) => {
  const table = `timers_${fencing}_${layout.replace('-', '_')}`;

  test('timers are written with the snapshot, recovered and read back; a later write without them drops them', async () => {
    const committer = new InMemoryOffsetCommitter();
    const options = { fencing, layout, ...(layout === 'by-partition' ? { buckets: 4 } : {}), tables: { snapshots: table, keys: `${table}_keys` } };
    const writer = await startBackend<{ n: number }>(keyspace, options);
    const reader = await startBackend<{ n: number }>(keyspace, options);
    try {
      const p1 = await writer.forPartition({ ...P, generation: 1, committer });
      // First writes (an insert under 'lwt'), then a second write of a at the same offset: a timer's
      // fire changed its state without a record (a conditional update that must land).
      await p1.write({ writes: [{ key: 'a', snapshot: { state: { n: 1 }, offset: 3, timers: [close] }, addKey: true }, { key: 'b', snapshot: { state: { n: 2 }, offset: 2 }, addKey: true }] });
      expect(
        (await p1.write({ writes: [{ key: 'a', snapshot: { state: { n: 3 }, offset: 3, timers: [close, ttl] } }, { key: 'c', snapshot: { state: { n: 4 }, offset: 4, timers: [ttl] }, addKey: true }] }))
          .statuses,
      ).toEqual(['applied', 'applied']);
      const p2 = await reader.forPartition({ ...P, generation: 2, committer });
      const recovered = new Map<string, unknown>();
      for await (const k of p2.recover()) recovered.set(k.key, k.snapshot);
      expect(recovered).toEqual(
        new Map([
          ['a', { state: { n: 3 }, offset: 3, timers: [close, ttl] }],
          ['b', { state: { n: 2 }, offset: 2 }],
          ['c', { state: { n: 4 }, offset: 4, timers: [ttl] }],
        ]),
      );
      await p2.write({ writes: [{ key: 'a', snapshot: { state: { n: 5 }, offset: 5 } }] });
      const p3 = await writer.forPartition({ ...P, generation: 3, committer });
      const again = new Map<string, unknown>();
      for await (const k of p3.recover()) again.set(k.key, k.snapshot);
      expect(again.get('a')).toEqual({ state: { n: 5 }, offset: 5 });
      expect(again.get('c')).toEqual({ state: { n: 4 }, offset: 4, timers: [ttl] });
      expect(await p3.read('c')).toEqual({ key: 'c', snapshot: { state: { n: 4 }, offset: 4, timers: [ttl] } });
      const rows = await cassandra.raw.execute(`SELECT key, metadata FROM ${keyspace}.${table} ALLOW FILTERING`);
      expect(rows.rows.find((r) => r.get('key') === 'b')!.get('metadata')).toBe(''); // as kafka-flow writes it
      if (layout === 'kafka-flow') {
        // Another writer's free text in metadata: no timers, and the row still reads.
        await cassandra.raw.execute(
          `UPDATE ${keyspace}.${table} SET metadata = 'written elsewhere' WHERE application_id = 'app' AND group_id = 'group' AND topic = 'orders' AND partition = 0 AND key = 'b'`,
        );
        expect(await p3.read('b')).toEqual({ key: 'b', snapshot: { state: { n: 2 }, offset: 2 } });
      }
    } finally {
      await closeAll(
        () => writer.close(),
        () => reader.close(),
      );
    }
  });
});
