// Snapshots recovered undecoded: the record's kind and offset read off the envelope's start (in
// place when uncompressed), its state decoded when first read — with a CorruptSnapshotError at
// the record's location if it does not decode — and a record in any other layout decoded at once.
import { Compressor } from '../../../../core/codec/compressor';
import { CorruptSnapshotError } from '../../../../core/codec/errors';
import { isLazySnapshot } from '../../../../flow/ports';
import { SnapshotCache } from '../../../../persistence/kafka/snapshot-cache';
import { peekEnvelope, snapshotFormat } from '../../../../persistence/kafka/snapshot-format';

const format = snapshotFormat<{ n: number }>();
const json = (text: string) => Buffer.from(text, 'utf8');
/** `bytes` framed by the Compressor, uncompressed, with a JSON or a one-byte header. */
const framed = (bytes: Buffer, header: 'json' | 'bool' = 'json') => new Compressor({ headerFormat: header, compressionThreshold: Number.POSITIVE_INFINITY }).compress(bytes);

describe('peeking at a snapshot record', () => {
  it('reads the kind and offset this format writes, framed, bare or compressed', () => {
    expect(format.peek(format.encode({ state: { n: 1 }, offset: 41 }))).toEqual({ deleted: false, offset: 41 });
    expect(format.peek(format.encodeMarker({ deleted: true, offset: 9 }))).toEqual({ deleted: true, offset: 9 });
    expect(format.peek(json('{"offset":0,"metadata":"","value":{"n":1}}'))).toEqual({ deleted: false, offset: 0 });
    expect(format.peek(framed(json('{"offset":12,"metadata":"","value":7}'), 'bool'))).toEqual({ deleted: false, offset: 12 });
    const big = snapshotFormat<string>({ compressor: new Compressor({ compressionThreshold: 100 }) });
    const compressed = big.encode({ state: 'x'.repeat(10_000), offset: 2 ** 53 - 1 });
    expect(compressed.length).toBeLessThan(500);
    expect(big.peek(compressed)).toEqual({ deleted: false, offset: 2 ** 53 - 1 });
  });

  it('gives up on every other layout, so such a record is decoded in full', () => {
    for (const text of [
      '{"value":{"n":1},"offset":3,"metadata":""}', // kafka-flow may order the fields otherwise
      '{"offset":"3","metadata":"","value":1}', // a string offset
      '{ "offset":3,"metadata":"","value":1}',
      '{"offset":03,"metadata":"","value":1}', // not JSON
      '{"offset":,"metadata":"","value":1}',
      '{"offset":9007199254740992,"metadata":"","value":1}', // past 2^53 - 1
      '{"offset":12345678901234567,"metadata":"","value":1}',
      '{"offset":3,"metadata":"x","value":1}',
      '{"offset":3,"metadata":"","deleted":true} ', // a marker is exactly this
      '{"offset":3,"metadata":"","deleted":false}',
      '{"offset":3',
    ]) {
      expect([text, format.peek(framed(json(text)))]).toEqual([text, undefined]);
    }
    expect(format.peek(Buffer.from([0, 0, 0, 40, 1, 2]))).toBeUndefined(); // damaged framing
    expect(format.peek(Buffer.alloc(0))).toBeUndefined();
    expect(peekEnvelope(json('xx{"offset":5,"metadata":"","value":1}'), 2)).toEqual({ deleted: false, offset: 5 });
  });

  it('finds an uncompressed payload in place, and only that', () => {
    const c = new Compressor();
    expect(c.uncompressedStart(json('{"a":1}'))).toBe(0);
    expect(c.uncompressedStart(framed(json('{"a":1}')))).toBe(24);
    expect(c.uncompressedStart(framed(json('{"a":1}'), 'bool'))).toBe(5);
    expect(c.uncompressedStart(new Compressor({ compressionThreshold: 0 }).compress(json('{"a":1}')))).toBeUndefined();
    expect(c.uncompressedStart(Buffer.from([0, 0, 0, 1]))).toBeUndefined();
  });
});

describe('the snapshot cache hands recovered records over lazily', () => {
  const where = { format, snapshotTopic: 'snapshots', partition: 2 };

  it('a snapshot in this format is decoded when its state is first read, then kept', () => {
    const cache = new SnapshotCache(where);
    let decodes = 0;
    const counting = {
      ...format,
      decode: (bytes: Buffer) => {
        decodes++;
        return format.decode(bytes);
      },
    };
    const lazyCache = new SnapshotCache({ ...where, format: counting });
    const found = lazyCache.recovered('k', { bytes: format.encode({ state: { n: 5 }, offset: 8 }), offset: '100' });
    expect(isLazySnapshot(found.snapshot)).toBe(true);
    expect(found.snapshot?.offset).toBe(8);
    expect(decodes).toBe(0);
    expect(found.snapshot?.state).toEqual({ n: 5 });
    expect(found.snapshot?.state).toEqual({ n: 5 });
    expect(decodes).toBe(1);
    const marker = format.encodeMarker({ deleted: true, offset: 4 });
    // The record's stored size rides along (a byte-bounded state cache counts the key by it).
    expect(cache.recovered('m', { bytes: marker, offset: '101' })).toEqual({ key: 'm', deleted: { offset: 4 }, size: marker.length });
  });

  it('a lazy snapshot that does not decode throws CorruptSnapshotError at the record\'s location when read', () => {
    const cache = new SnapshotCache(where);
    const found = cache.recovered('broken', { bytes: framed(json('{"offset":8,"metadata":"","value":{"n":')), offset: '100' });
    expect(found.snapshot?.offset).toBe(8);
    let error: unknown;
    try {
      void found.snapshot?.state;
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CorruptSnapshotError);
    expect(error).toMatchObject({ code: 'CORRUPT_SNAPSHOT', topic: 'snapshots', partition: 2, offset: '100', key: 'broken' });
    // Two "offset" fields: JSON takes the last, the peek the first — corrupt, not silently another offset.
    const twice = cache.recovered('twice', { bytes: framed(json('{"offset":8,"metadata":"","value":1,"offset":9}')), offset: '102' });
    expect(() => twice.snapshot?.state).toThrow(CorruptSnapshotError);
  });

  it('a record in another layout is decoded at once: a damaged one fails there', () => {
    const cache = new SnapshotCache(where);
    const bytes = framed(json('{"value":{"n":2},"offset":3,"metadata":""}'));
    const foreign = cache.recovered('f', { bytes, offset: '7' });
    expect(isLazySnapshot(foreign.snapshot)).toBe(false);
    expect(foreign).toEqual({ key: 'f', snapshot: { state: { n: 2 }, offset: 3 }, size: bytes.length });
    expect(() => cache.recovered('d', { bytes: Buffer.from([0, 0, 0, 40, 1, 2]), offset: '8' })).toThrow(CorruptSnapshotError);
  });
});
