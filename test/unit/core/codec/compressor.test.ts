import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compressSync, uncompressSync } from 'lz4-napi';
import { Counter, Registry } from 'prom-client';
import { ConfigError } from '../../../../config/errors';
import {
  Compressor,
  compressorMetrics,
  DEFAULT_COMPRESSION_THRESHOLD,
  lz4CompressBlock,
  lz4DecompressBlock,
  withCompression,
} from '../../../../core/codec/compressor';
import { CompressionError } from '../../../../core/codec/errors';
import { jsonCodec } from '../../../../core/codec/json';

const hex = (h: string) => Buffer.from(h.replace(/\s+/g, ''), 'hex');
const text = (s: string) => Buffer.from(s, 'utf8');

/** The payload the lz4-java fixture was made from (17,484 bytes of JSON). */
const fixtureState = () =>
  text(
    JSON.stringify({
      key: 'account-42',
      events: Array.from({ length: 400 }, (_, i) => ({
        seq: i,
        kind: i % 3 === 0 ? 'deposit' : 'withdrawal',
        amount: (i * 37) % 1000,
      })),
    }),
  );

/** A payload of `n` bytes that compresses well and does not start with `{`. */
const payload = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => 'abcdefgh'.charCodeAt(i % 8)));

const JSON_TRUE = '000000137b22636f6d70726573736564223a747275657d'; // 19, {"compressed":true}
const JSON_FALSE = '000000147b22636f6d70726573736564223a66616c73657d'; // 20, {"compressed":false}

describe('Compressor: round trips', () => {
  it('leaves payloads below the threshold uncompressed and returns them intact', () => {
    const c = new Compressor();
    const bytes = payload(DEFAULT_COMPRESSION_THRESHOLD - 1);
    const framed = c.compress(bytes);
    expect(framed.subarray(0, 24).toString('hex')).toBe(JSON_FALSE);
    expect(framed.subarray(24).equals(bytes)).toBe(true);
    expect(c.decompress(framed).equals(bytes)).toBe(true);
  });

  it('compresses payloads at or above the threshold (kafka-flow compares with >=)', () => {
    const c = new Compressor({ compressionThreshold: 1000 });
    for (const n of [1000, 1001, 50_000]) {
      const bytes = payload(n);
      const framed = c.compress(bytes);
      expect(framed.subarray(0, 23).toString('hex')).toBe(JSON_TRUE);
      expect(framed.readInt32BE(23)).toBe(n);
      expect(framed.length).toBeLessThan(n);
      expect(c.decompress(framed).equals(bytes)).toBe(true);
    }
    const below = c.compress(payload(999));
    expect(below.subarray(0, 24).toString('hex')).toBe(JSON_FALSE);
  });

  it('defaults to a threshold of 10,000 bytes', () => {
    const c = new Compressor();
    expect(c.compressionThreshold).toBe(10_000);
    expect(c.compress(payload(9_999)).subarray(0, 24).toString('hex')).toBe(JSON_FALSE);
    expect(c.compress(payload(10_000)).subarray(0, 23).toString('hex')).toBe(JSON_TRUE);
  });

  it('round-trips empty, small, large and incompressible payloads with threshold 0', () => {
    const c = new Compressor({ compressionThreshold: 0 });
    const random = Buffer.alloc(100_000);
    for (let i = 0, x = 12345; i < random.length; i++) {
      x = (x * 1103515245 + 12345) >>> 0;
      random[i] = x >>> 24;
    }
    for (const bytes of [Buffer.alloc(0), text('x'), payload(3_000_000), random]) {
      expect(c.decompress(c.compress(bytes)).equals(bytes)).toBe(true);
    }
  });

  it('never compresses with threshold Infinity', () => {
    const c = new Compressor({ compressionThreshold: Number.POSITIVE_INFINITY });
    expect(c.compress(payload(100_000)).subarray(0, 24).toString('hex')).toBe(JSON_FALSE);
  });

  it('accepts a plain Uint8Array and a Buffer that is a slice of a larger one', () => {
    const c = new Compressor({ compressionThreshold: 10 });
    const backing = Buffer.concat([text('JUNK'), payload(64), text('JUNK')]);
    const slice = backing.subarray(4, 68);
    expect(c.decompress(c.compress(slice)).equals(payload(64))).toBe(true);
    const u8 = new Uint8Array(payload(64));
    expect(c.decompress(new Uint8Array(c.compress(u8))).equals(payload(64))).toBe(true);
  });

  it('rejects a bad threshold or header format as configuration errors', () => {
    expect(() => new Compressor({ compressionThreshold: -1 })).toThrow(ConfigError);
    expect(() => new Compressor({ compressionThreshold: 1.5 })).toThrow(ConfigError);
    expect(() => new Compressor({ compressionThreshold: Number.NaN })).toThrow(ConfigError);
    expect(() => new Compressor({ headerFormat: 'xml' as never })).toThrow(ConfigError);
  });
});

describe('Compressor: kafka-flow byte format (golden bytes)', () => {
  // kafka-flow's CompressorSpec: "test" below the threshold is 9 bytes with a one-byte header,
  // above it (threshold 1) 14 bytes. An LZ4 block of under 13 bytes is all literals, so every
  // LZ4 compressor writes the same block: token 0x40 then the 4 bytes.
  it('writes "test" with a bool header exactly as kafka-flow with scodec bool does', () => {
    const raw = new Compressor({ headerFormat: 'bool' }).compress(text('test'));
    expect(raw.toString('hex')).toBe('00000001' + '00' + '74657374');
    expect(raw.length).toBe(9);
    const compressed = new Compressor({ headerFormat: 'bool', compressionThreshold: 1 }).compress(text('test'));
    expect(compressed.toString('hex')).toBe('00000001' + '80' + '00000004' + '4074657374');
    expect(compressed.length).toBe(14);
  });

  it('writes "test" with the JSON header {"compressed":true|false}', () => {
    expect(new Compressor().compress(text('test')).toString('hex')).toBe(JSON_FALSE + '74657374');
    expect(new Compressor({ compressionThreshold: 1 }).compress(text('test')).toString('hex')).toBe(
      JSON_TRUE + '00000004' + '4074657374',
    );
  });

  it('reads these bytes as produced by kafka-flow with lz4-java', () => {
    const c = new Compressor();
    expect(c.decompress(hex('0000000180000000044074657374')).toString()).toBe('test');
    expect(c.decompress(hex('000000010074657374')).toString()).toBe('test');
    expect(c.decompress(hex(`${JSON_TRUE}000000044074657374`)).toString()).toBe('test');
    // 32 × 'a' from lz4-java's fastCompressor: a match with a length byte, then 5 literals.
    expect(c.decompress(hex(`00000001 80 00000020 1f6101000750 6161616161`)).toString()).toBe('a'.repeat(32));
  });

  it('reads a 17 KB JSON state compressed by lz4-java in kafka-flow framing, either header', () => {
    const fixture = hex(readFileSync(join(__dirname, 'fixtures', 'lz4-java-state.hex'), 'utf8'));
    expect(fixture.subarray(0, 23).toString('hex')).toBe(JSON_TRUE);
    const state = fixtureState();
    expect(new Compressor().decompress(fixture).equals(state)).toBe(true);
    const boolFramed = Buffer.concat([hex('0000000180'), fixture.subarray(23)]);
    expect(new Compressor().decompress(boolFramed).equals(state)).toBe(true);
  });

  it('reads any one-byte header by its top bit, as scodec bool does, and JSON with spaces or extra fields', () => {
    const c = new Compressor();
    expect(c.decompress(hex('00000001 01 74657374')).toString()).toBe('test');
    expect(c.decompress(hex('00000001 ff 00000004 4074657374')).toString()).toBe('test');
    const header = text('{ "compressed" : false, "v": 1 }');
    const framed = Buffer.concat([hex(header.length.toString(16).padStart(8, '0')), header, text('test')]);
    expect(c.decompress(framed).toString()).toBe('test');
  });
});

describe('Compressor: raw JSON from before compression', () => {
  it('returns bytes starting with { as they are', () => {
    const c = new Compressor({ compressionThreshold: 1 });
    const old = text('{"key":"value"}');
    expect(c.decompress(old)).toBe(old);
    expect(c.decompress(text('{not even json')).toString()).toBe('{not even json');
  });

  it('reads old raw JSON state through withCompression', () => {
    const codec = withCompression(jsonCodec<{ n: number }>(), new Compressor());
    expect(codec.decode(text('{"n":7}'))).toEqual({ n: 7 });
  });
});

describe('Compressor: corrupt bytes', () => {
  const c = new Compressor();
  const good = new Compressor({ compressionThreshold: 1 }).compress(payload(5000));

  it.each([
    ['empty', Buffer.alloc(0)],
    ['shorter than the header length', hex('000000')],
    ['a zero header length', hex('00000000 74657374')],
    ['a negative header length', hex('ffffffff 00')],
    ['a header length past the end', hex('00000010 80')],
    ['a truncated JSON header', good.subarray(0, 10)],
    ['a header that is not JSON', hex('00000002 8080 74657374')],
    ['a JSON header without the flag', Buffer.concat([hex('00000002'), text('{}')])],
    ['a JSON header with a string flag', Buffer.concat([hex('00000014'), text('{"compressed":"yes"}')])],
    ['a compressed payload with no block', hex(`${JSON_TRUE}00000004`)],
    ['a compressed payload cut short', good.subarray(0, good.length - 10)],
    ['a declared length that is too small', Buffer.concat([good.subarray(0, 23), hex('00000010'), good.subarray(27)])],
    ['a declared length that is too large', Buffer.concat([good.subarray(0, 23), hex('00001389'), good.subarray(27)])],
    ['an impossible declared length', Buffer.concat([good.subarray(0, 23), hex('7fffffff'), good.subarray(27)])],
    ['a negative declared length', Buffer.concat([good.subarray(0, 23), hex('80000000'), good.subarray(27)])],
    ['a garbage block', Buffer.concat([hex(`${JSON_TRUE}00000020`), hex('deadbeefcafebabe0011223344')])],
    ['a match offset before the start', hex(`${JSON_TRUE}00000020 1f6109000750 6161616161`)],
    ['random bytes', hex('0a0b0c0d0e0f')],
  ])('throws a CompressionError for %s', (_name, bytes) => {
    expect(() => c.decompress(bytes)).toThrow(CompressionError);
    try {
      c.decompress(bytes);
    } catch (err) {
      expect((err as CompressionError).code).toBe('COMPRESSION');
      expect((err as Error).message.length).toBeGreaterThan(20);
    }
  });
});

describe('lz4 block helpers and lz4-napi', () => {
  it('swaps lz4-napi little-endian size prefix for a big-endian one', () => {
    const bytes = payload(70_000); // 0x00011170
    const napi = compressSync(bytes);
    expect(napi.readUInt32LE(0)).toBe(70_000);
    const ours = lz4CompressBlock(bytes);
    expect(ours.subarray(0, 4).toString('hex')).toBe('00011170');
    expect(ours.subarray(4).equals(napi.subarray(4))).toBe(true);
    expect(lz4DecompressBlock(ours).equals(bytes)).toBe(true);
  });

  it('decodes lz4-napi blocks and lz4-napi decodes ours', () => {
    const bytes = fixtureState();
    const ours = lz4CompressBlock(bytes);
    const asNapi = Buffer.from(ours);
    asNapi.writeUInt32LE(bytes.length, 0);
    expect(uncompressSync(asNapi).equals(bytes)).toBe(true);
  });
});

describe('withCompression', () => {
  it('compresses a codec value above the threshold and reads it back', () => {
    const codec = withCompression(jsonCodec<{ items: string[] }>(), new Compressor({ compressionThreshold: 100 }));
    const small = { items: ['a'] };
    const big = { items: Array.from({ length: 500 }, (_, i) => `item-${i % 10}`) };
    expect(codec.decode(codec.encode(small))).toEqual(small);
    const bytes = codec.encode(big);
    expect(bytes.subarray(0, 23).toString('hex')).toBe(JSON_TRUE);
    expect(codec.decode(bytes)).toEqual(big);
  });
});

describe('metrics', () => {
  it('reports raw and framed sizes through plain callbacks', () => {
    const raw: number[] = [];
    const out: number[] = [];
    const c = new Compressor({
      compressionThreshold: 100,
      metrics: { rawBytes: (n) => raw.push(n), compressedBytes: (n) => out.push(n) },
    });
    c.compress(payload(10));
    const big = c.compress(payload(10_000));
    c.decompress(big);
    expect(raw).toEqual([10, 10_000]);
    expect(out).toEqual([4 + 20 + 10, big.length]);
  });

  it('feeds prom-client counters labelled by component', async () => {
    const registry = new Registry();
    const rawCounter = new Counter({
      name: 'compressor_raw_bytes',
      help: 'raw',
      labelNames: ['component'],
      registers: [registry],
    });
    const compressedCounter = new Counter({
      name: 'compressor_compressed_bytes',
      help: 'compressed',
      labelNames: ['component'],
      registers: [registry],
    });
    const c = new Compressor({
      compressionThreshold: 0,
      metrics: compressorMetrics('snapshots', { raw: rawCounter, compressed: compressedCounter }),
    });
    const framed = c.compress(payload(20_000));
    const rawValue = (await rawCounter.get()).values[0];
    const compressedValue = (await compressedCounter.get()).values[0];
    expect(rawValue).toMatchObject({ value: 20_000, labels: { component: 'snapshots' } });
    expect(compressedValue).toMatchObject({ value: framed.length, labels: { component: 'snapshots' } });
  });

  it('accepts observe-style metrics (Summary, Histogram)', () => {
    const seen: Array<[string, number]> = [];
    const metric = { observe: (labels: { component: string }, n: number) => seen.push([labels.component, n]) };
    new Compressor({ metrics: compressorMetrics('c', { raw: metric, compressed: metric }) }).compress(text('ab'));
    expect(seen).toEqual([
      ['c', 2],
      ['c', 26],
    ]);
  });
});
