/**
 * Helpers for byte-level tests of the patched kafkajs protocol modules: golden bytes are written
 * as annotated hex, one protocol field per line, so a reviewer can check them against the spec.
 */
import { createRequire } from 'node:module';

const requireFromHere = createRequire(__filename);

/** Loads a (patched) kafkajs module by its path under `kafkajs/src/`. */
export function kafkajsModule<T = unknown>(path: string): T {
  return requireFromHere(`kafkajs/src/${path}`) as T;
}

/** Annotated hex → bytes: `#` starts a comment; whitespace is ignored. */
export function hex(annotated: string): Buffer {
  const digits = annotated
    .split('\n')
    .map((line) => line.replace(/#.*$/, ''))
    .join('')
    .replace(/\s+/g, '');
  if (digits.length % 2 !== 0 || /[^0-9a-f]/i.test(digits)) {
    throw new Error(`bad golden hex: ${digits}`);
  }
  return Buffer.from(digits, 'hex');
}

export interface EncodedRequest {
  apiKey: number;
  apiVersion: number;
  apiName: string;
  encode(): Promise<{ buffer: Buffer }>;
}

export interface ResponseCodec<T> {
  decode(raw: Buffer): Promise<T>;
  parse(decoded: T): Promise<T>;
}

export interface ProtocolError extends Error {
  type: string;
  code: number;
  retriable: boolean;
}
