import type { Codec } from './codec';
import { utf8Text } from './utf8';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * UTF-8 JSON. `encode` throws for values JSON cannot represent (undefined, a function, a symbol, a
 * BigInt, a cycle); `decode` throws on bytes that are not UTF-8 or not JSON. Neither checks the
 * shape against T: validate decoded values where they come from outside.
 */
export function jsonCodec<T>(): Codec<T> {
  const decode = (bytes: Buffer): T => {
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch (err) {
      throw new Error(`not valid UTF-8 (${bytes.length} bytes)`, { cause: err });
    }
    return parse<T>(text);
  };
  return {
    encode(value: T): Buffer {
      return Buffer.from(jsonText(value), 'utf8');
    },
    encodeText: jsonText,
    decode,
    decodeFrom(bytes: Buffer, start: number, end: number): T {
      const text = utf8Text(bytes, start, end);
      // Node's UTF-8 decoding replaces what is not UTF-8 with U+FFFD and keeps a BOM: valid UTF-8
      // without a BOM decodes to the same text as with the strict decoder. Anything else (or a
      // text that really holds U+FFFD) takes the strict path, with its error.
      if (text.indexOf('\uFFFD') !== -1 || text.charCodeAt(0) === 0xfeff) return decode(bytes.subarray(start, end));
      return parse<T>(text);
    },
  };
}

function parse<T>(text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    const preview = text.length > 80 ? `${text.slice(0, 80)}…` : text;
    throw new Error(`not valid JSON: ${(err as Error).message}; the text begins: ${preview}`, { cause: err });
  }
}

function jsonText(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) {
    throw new TypeError(`cannot encode a value of type ${typeof value} as JSON`);
  }
  return text;
}
