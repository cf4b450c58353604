// The local store's due-time index, pure parts: its entries sort as (clock, due time, key) — the
// times as numbers, negative ones included — and a clock's range holds exactly the entries due at
// or before a time; a snapshot record's timers are read from its bytes (our envelope, compressed or
// not, another writer's layout, a delete marker).
import { Compressor } from '../../../../core/codec/compressor';
import { dueEntries, dueEntry, dueRange, readDueEntry } from '../../../../persistence/kafka/due-index';
import { recordTimers } from '../../../../persistence/kafka/record-timers';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';

test('entries sort by clock, then due time as a number, then key', () => {
  const entries = [
    dueEntry('b', 'event', 5),
    dueEntry('a', 'processing', 1_700_000_000_000),
    dueEntry('z', 'processing', -3),
    dueEntry('a', 'processing', 2),
    dueEntry('b', 'processing', 2),
    dueEntry('a', 'event', -1_000),
    dueEntry('é', 'processing', 2),
  ];
  const sorted = [...entries].sort(Buffer.compare).map((e) => readDueEntry(e));
  expect(sorted).toEqual([
    { time: 'processing', at: -3, key: 'z' },
    { time: 'processing', at: 2, key: 'a' },
    { time: 'processing', at: 2, key: 'b' },
    { time: 'processing', at: 2, key: 'é' },
    { time: 'processing', at: 1_700_000_000_000, key: 'a' },
    { time: 'event', at: -1_000, key: 'a' },
    { time: 'event', at: 5, key: 'b' },
  ]);
});

test('a clock\'s range up to a time holds exactly the entries due at or before it (a fractional time rounds down)', () => {
  const all = [-5, 0, 9, 10, 10.7, 11, 1e12].flatMap((at) => [dueEntry('k', 'processing', at), dueEntry('k', 'event', at)]);
  const { start, end } = dueRange('processing', 10);
  const inRange = all.filter((e) => Buffer.compare(e, start) >= 0 && Buffer.compare(e, end) < 0).map((e) => readDueEntry(e));
  expect(inRange.map((e) => [e.time, e.at])).toEqual([
    ['processing', -5],
    ['processing', 0],
    ['processing', 9],
    ['processing', 10],
    ['processing', 10],
  ]);
});

test('a key\'s entries: one per distinct (clock, time)', () => {
  expect(
    dueEntries('k', [
      { name: 'a', at: 5, time: 'event' },
      { name: 'b', at: 5, time: 'event' },
      { name: 'c', at: 5, time: 'processing' },
    ]).map((e) => readDueEntry(e)),
  ).toEqual([
    { time: 'event', at: 5, key: 'k' },
    { time: 'processing', at: 5, key: 'k' },
  ]);
  expect(dueEntries('k', undefined)).toEqual([]);
});

describe('recordTimers', () => {
  const timers = [
    { name: 'close ] "quoted" \\ [', at: 1_000, time: 'event' as const },
    { name: '__ttl', at: 2_000, time: 'processing' as const },
  ];

  test('our envelope, uncompressed and compressed, with and without timers; a delete marker', () => {
    const plain = snapshotFormat<unknown>();
    expect(recordTimers(plain.encode({ state: { a: '],"value":' }, offset: 3, timers }))).toEqual(timers);
    expect(recordTimers(plain.encode({ state: { a: 1 }, offset: 3 }))).toBeUndefined();
    expect(recordTimers(plain.encodeMarker({ deleted: true, offset: 3 }))).toBeUndefined();
    const compressing = snapshotFormat<unknown>({ compressor: new Compressor({ compressionThreshold: 10 }) });
    const big = compressing.encode({ state: { text: 'x'.repeat(500) }, offset: 4, timers });
    expect(new Compressor().uncompressedStart(big)).toBeUndefined();
    expect(recordTimers(big)).toEqual(timers);
  });

  test('another writer\'s layout is parsed in full; bytes that do not parse have none', () => {
    expect(recordTimers(Buffer.from(JSON.stringify({ value: 1, timers, offset: 1, metadata: '' })))).toEqual(timers);
    expect(recordTimers(Buffer.from('{"offset":1,"metadata":"","timers":[{"name":1}],"value":1}'))).toBeUndefined();
    expect(recordTimers(Buffer.from([0, 0, 0, 9, 1]))).toBeUndefined();
  });
});
