/**
 * Helpers for byte-level tests of the patched kafkajs protocol modules: golden bytes are written
 * as annotated hex, one protocol field per line, so a reviewer can check them against the spec.
 */
import { createRequire } from 'node:module';
import { registerKafkajsExtensions } from '../../../../kafka/protocol/extensions';

const requireFromHere = createRequire(__filename);

/**
 * Loads a (patched) kafkajs module by its path under `kafkajs/src/`, with the patch's hooks into
 * kafka/protocol/ registered, as every kafkajs client of the project has them.
 */
export function kafkajsModule<T = unknown>(path: string): T {
  registerKafkajsExtensions();
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

/** A broker's ApiVersions answer: per API key, the versions it accepts. */
export type BrokerVersions = Record<number, { minVersion: number; maxVersion: number }>;

type RequestDefinition = { versions: string[]; protocol: (args: { version: number }) => unknown };
const { requests, lookup } = kafkajsModule<{
  requests: Record<string, RequestDefinition>;
  lookup: (versions: BrokerVersions) => (apiKey: number, definition: RequestDefinition) => (args: Record<string, unknown>) => { request: { apiVersion: number } };
}>('protocol/requests');

/** The version of request `name` (API key `apiKey`) the patched kafkajs sends to a broker with these versions. */
export function negotiatedVersion(broker: BrokerVersions, apiKey: number, name: string): number {
  const definition = requests[name];
  if (!definition) throw new Error(`no request ${name}`);
  const args = { transactionalId: 't', groupId: 'g', producerId: 1, producerEpoch: 0, topics: [] };
  return lookup(broker)(apiKey, definition)(args).request.apiVersion;
}
