/**
 * One record of a v2 record batch (kafkajs's `recordBatch/record/v0`), for the Produce requests the
 * one-buffer writer leaves to kafkajs's encoders (the patch's `encodeRecord` hook):
 *
 * Record => Length Attributes TimestampDelta OffsetDelta Key Value [Headers]
 *   Length => VARINT
 *   Attributes => INT8
 *   TimestampDelta => VARLONG
 *   OffsetDelta => VARINT
 *   Key => VARINT length + bytes (-1: null)
 *   Value => VARINT length + bytes (-1: null)
 *   Headers => VARINT count, then per header: key (VARINT length + UTF-8), value (VARINT length + bytes)
 *
 * The bytes and errors of kafkajs 2.2.4's encoder, written into one Encoder of the record's exact
 * size with the headers inline (kafkajs made an Encoder per record and per header, zero-filled), and
 * a timestamp delta within ±2^30 ms as a plain varint: zigzag-encoded it is the same varint as the
 * varlong, without kafkajs's Long arithmetic.
 */
import { Encoder, type KafkajsEncoder } from './kafkajs-protocol';

/** A record's fields as kafkajs's Produce request hands them over (a message spread, plus the deltas). */
export interface RecordFields {
  offsetDelta?: number;
  /** A number as computed from the messages' timestamps (NaN for text); anything else as kafkajs's varlong takes it. */
  timestampDelta?: unknown;
  key?: unknown;
  value?: unknown;
  /** Header values: a string or Buffer, or an array of them (kafkajs fails on other values, and so does this). */
  headers?: Record<string, unknown>;
}

export function encodeRecord({ offsetDelta = 0, timestampDelta = 0, key, value, headers = {} }: RecordFields): KafkajsEncoder {
  const headerKeys: string[] = [];
  const headerValues: unknown[] = [];
  for (const headerKey of Object.keys(headers)) {
    const headerValue = headers[headerKey];
    if (Array.isArray(headerValue)) {
      for (const one of headerValue) {
        headerKeys.push(headerKey);
        headerValues.push(one);
      }
    } else {
      headerKeys.push(headerKey);
      headerValues.push(headerValue);
    }
  }

  const smallDelta = typeof timestampDelta === 'number' && Number.isInteger(timestampDelta) && timestampDelta > -0x40000000 && timestampDelta < 0x40000000;

  const sizeOfBody =
    1 + // always one byte for attributes
    (smallDelta ? Encoder.sizeOfVarInt(timestampDelta) : Encoder.sizeOfVarLong(timestampDelta)) +
    Encoder.sizeOfVarInt(offsetDelta) +
    Encoder.sizeOfVarIntBytes(key) +
    Encoder.sizeOfVarIntBytes(value) +
    sizeOfHeaders(headerKeys, headerValues);

  const encoder = new Encoder(Encoder.sizeOfVarInt(sizeOfBody) + sizeOfBody).writeVarInt(sizeOfBody).writeInt8(0); // no record attributes in use
  if (smallDelta) encoder.writeVarInt(timestampDelta);
  else encoder.writeVarLong(timestampDelta);
  encoder.writeVarInt(offsetDelta).writeVarIntBytes(key).writeVarIntBytes(value).writeVarInt(headerKeys.length);
  for (let i = 0; i < headerKeys.length; i++) {
    encoder.writeVarIntString(headerKeys[i]).writeVarIntBytes(headerValues[i]);
  }
  return encoder;
}

/** The headers' bytes; like kafkajs's, throws (Buffer.byteLength) for a value not a string or Buffer, null included. */
function sizeOfHeaders(headerKeys: readonly string[], headerValues: readonly unknown[]): number {
  let size = Encoder.sizeOfVarInt(headerKeys.length);
  for (let i = 0; i < headerKeys.length; i++) {
    const keySize = Buffer.byteLength(headerKeys[i]!);
    const valueSize = Buffer.byteLength(headerValues[i] as string | Buffer);
    size += Encoder.sizeOfVarInt(keySize) + keySize + Encoder.sizeOfVarInt(valueSize) + valueSize;
  }
  return size;
}
