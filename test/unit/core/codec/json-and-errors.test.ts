import { KafkaFlowError } from '../../../../config/errors';
import type { Codec } from '../../../../core/codec/codec';
import {
  CompressionError,
  CorruptSnapshotError,
  DecodeError,
  decodeRecord,
  decodeSnapshot,
} from '../../../../core/codec/errors';
import { jsonCodec } from '../../../../core/codec/json';
import { keyHash, setLogKeys, WithheldMessageError } from '../../../../core/redact';

describe('jsonCodec', () => {
  const codec = jsonCodec<unknown>();

  it('round-trips JSON values as UTF-8', () => {
    for (const v of [{ a: 1, b: ['x', null, true] }, 'héllo ✓ 😀', 0, [], null]) {
      expect(codec.decode(codec.encode(v))).toEqual(v);
    }
    expect(codec.encode({ s: 'é' }).toString('hex')).toBe(Buffer.from('{"s":"é"}', 'utf8').toString('hex'));
  });

  it('throws on bytes that are not JSON, naming what it saw', () => {
    expect(() => codec.decode(Buffer.from('{"a":'))).toThrow(/not valid JSON.*\{"a":/);
    expect(() => codec.decode(Buffer.alloc(0))).toThrow(/not valid JSON/);
  });

  it('throws on bytes that are not UTF-8', () => {
    expect(() => codec.decode(Buffer.from([0x22, 0xff, 0xfe, 0x22]))).toThrow(/not valid UTF-8/);
  });

  it('decodeFrom(bytes, start, end) is decode(bytes.subarray(start, end)): the same value or the same error', () => {
    const outcome = (f: () => unknown) => {
      try {
        return { value: f() };
      } catch (err) {
        return { error: (err as Error).message, cause: ((err as Error).cause as Error | undefined)?.message };
      }
    };
    const texts: Array<number[] | string> = [
      '{"n":1,"amount":42}',
      '"héllo ✓ 😀"',
      '"\uFFFD is the replacement character"',
      '"�"', // a real U+FFFD: valid, decoded strictly too
      '﻿{"bom":true}', // a BOM: TextDecoder drops it, JSON.parse then takes the rest
      '{"bom":"﻿"}',
      '',
      '{"a":',
      'null',
      [0x22, 0xff, 0xfe, 0x22], // not UTF-8
      [0x22, 0xc0, 0xaf, 0x22], // overlong
      [0x22, 0xed, 0xa0, 0x80, 0x22], // a surrogate
      [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], // past U+10FFFF
      [0x22, 0xe2, 0x82, 0x22], // truncated
      [0x22, 0xe2, 0x82], // truncated at the end
      [0xef, 0xbb, 0xbf, 0x31], // a BOM, then 1
      [0xef, 0xbb, 0xbf], // a BOM alone
    ];
    for (const text of texts) {
      const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text);
      // Embedded in a larger buffer, as a value in a fetch response is.
      const response = Buffer.concat([Buffer.from('\xff{"before"'), bytes, Buffer.from([0xff, 0x7b])]);
      const start = Buffer.byteLength('\xff{"before"');
      const strict = outcome(() => codec.decode(bytes));
      expect(outcome(() => codec.decodeFrom!(response, start, start + bytes.length))).toStrictEqual(strict);
    }
    expect(codec.decodeFrom!(Buffer.from('xx[1,2]yy'), 2, 7)).toStrictEqual([1, 2]);
    expect(outcome(() => codec.decodeFrom!(Buffer.from([0x22, 0xff, 0x22]), 0, 3)).error).toMatch(/not valid UTF-8/);
    expect(outcome(() => codec.decodeFrom!(Buffer.from('﻿1', 'utf8'), 0, 4))).toStrictEqual({ value: 1 });
  });

  it('throws on values JSON cannot encode', () => {
    expect(() => codec.encode(undefined)).toThrow(TypeError);
    expect(() => codec.encode(() => 1)).toThrow(TypeError);
    expect(() => codec.encode(10n)).toThrow(TypeError);
  });
});

describe('DecodeError and CorruptSnapshotError', () => {
  const location = { topic: 'payments', partition: 3, key: 'acct-1', offset: '9007199254740993' };

  afterEach(() => setLogKeys(false));

  it('DecodeError carries the location, the cause and code DECODE (with logKeys)', () => {
    setLogKeys(true);
    const cause = new Error('not valid JSON: Unexpected end');
    const err = new DecodeError(location, cause);
    expect(err).toBeInstanceOf(KafkaFlowError);
    expect(err.name).toBe('DecodeError');
    expect(err.code).toBe('DECODE');
    expect(err).toMatchObject(location);
    expect(err.cause).toBe(cause);
    for (const part of ['payments', 'partition 3', '9007199254740993', '"acct-1"', 'not valid JSON', 'skip']) {
      expect(err.message).toContain(part);
    }
  });

  it('DecodeError without logKeys (the default): the key as a hash, the codec message withheld, nothing of either in JSON', () => {
    const cause = new Error('not valid JSON: "secret-value"');
    const err = new DecodeError(location, cause);
    expect(err.key).toBe('acct-1');
    expect(err.message).toContain(`key #${keyHash('acct-1')}`);
    expect(err.cause).toBeInstanceOf(WithheldMessageError);
    expect(String((err.cause as Error).message)).toMatch(/^Error: \[redacted: logKeys is off\]/);
    const everything = `${err.message} ${err.stack} ${JSON.stringify(err)} ${JSON.stringify(Object.entries(err))}`;
    expect(everything).not.toContain('acct-1');
    expect(everything).not.toContain('secret-value');
  });

  it('says when the record has no key, and shortens very long keys', () => {
    setLogKeys(true);
    expect(new DecodeError({ ...location, key: undefined }, 'x').message).toContain('no key');
    const long = new DecodeError({ ...location, key: 'k'.repeat(5000) }, 'x');
    expect(long.message.length).toBeLessThan(1000);
    expect(long.key).toHaveLength(5000);
  });

  it('CorruptSnapshotError carries the location, the cause and code CORRUPT_SNAPSHOT', () => {
    const cause = new CompressionError('the LZ4 block does not decompress');
    const err = new CorruptSnapshotError(location, cause);
    expect(err).toBeInstanceOf(KafkaFlowError);
    expect(err.code).toBe('CORRUPT_SNAPSHOT');
    expect(err).toMatchObject(location);
    expect(err.cause).toBe(cause);
    expect(err.message).toContain('LZ4 block');
    expect(err.message).toContain('delete');
  });

  it('decodeRecord and decodeSnapshot wrap codec failures with their location', () => {
    const failing: Codec<never> = {
      encode: () => Buffer.alloc(0),
      decode: () => {
        throw new Error('boom');
      },
    };
    expect(() => decodeRecord(failing, Buffer.alloc(0), location)).toThrow(DecodeError);
    expect(() => decodeSnapshot(failing, Buffer.alloc(0), location)).toThrow(CorruptSnapshotError);
    expect(decodeRecord(jsonCodec<number>(), Buffer.from('5'), location)).toBe(5);
  });
});
