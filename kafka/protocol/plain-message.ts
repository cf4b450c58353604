/**
 * Records encoded already (`encoded`, see produce-records.ts) given back as key, value and headers,
 * for kafkajs's own encoders: the patch's Produce request calls `plainTopicData` (hook of the same
 * name) when the one-buffer writer left a request to them.
 */
import type { ProduceMessage } from './produce-records';
import { readVarInt } from '../../core/varint';

/** A message as kafkajs's encoders take it: key, value and headers (Buffers: the same bytes). */
export type PlainMessage = Omit<ProduceMessage, 'encoded' | 'encodedStart' | 'encodedEnd'> & {
  headers?: unknown;
};

/** `message` itself, or, encoded already, its key, value and headers decoded (other fields kept). */
export function plainMessage(message: ProduceMessage): PlainMessage {
  if (message.encoded === undefined) return message;
  const buf = message.encoded as Buffer;
  const cursor = { at: message.encodedStart! };
  const key = readBytes(buf, cursor);
  const value = readBytes(buf, cursor);
  const headers: Record<string, Buffer | null | Array<Buffer | null>> = {};
  const count = readVarInt(buf, cursor);
  for (let h = 0; h < count; h++) {
    const name = readBytes(buf, cursor)!.toString('utf8');
    const headerValue = readBytes(buf, cursor);
    const known = headers[name];
    if (known === undefined) headers[name] = headerValue;
    else headers[name] = Array.isArray(known) ? [...known, headerValue] : [known, headerValue];
  }
  const { encoded: _encoded, encodedStart: _start, encodedEnd: _end, ...rest } = message;
  return { ...rest, key, value, headers };
}

/** The topic data of a Produce request with every message encoded already made plain. */
export function plainTopicData<T extends { partitions: ReadonlyArray<{ messages: readonly ProduceMessage[] }> }>(topicData: readonly T[]): T[] {
  return topicData.map((data) => ({
    ...data,
    partitions: data.partitions.map((p) => (p.messages.some((m) => m.encoded !== undefined) ? { ...p, messages: p.messages.map(plainMessage) } : p)),
  }));
}

/** Length-prefixed bytes (a copy), null for length -1. */
function readBytes(buf: Buffer, cursor: { at: number }): Buffer | null {
  const length = readVarInt(buf, cursor);
  if (length < 0) return null;
  const bytes = Buffer.from(buf.subarray(cursor.at, cursor.at + length));
  cursor.at += length;
  return bytes;
}
