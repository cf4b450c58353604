/**
 * The varints of Kafka's v2 record format on a Buffer (record lengths and deltas, key, value and
 * header lengths): zigzag-encoded 32-bit signed values, seven bits a byte, least significant first
 * (kafkajs's `writeVarInt`'s bytes). Emitted outputs are written with them (emitted-outputs.ts),
 * and so are produce requests (kafka/protocol/produce-records.ts).
 */

const zigZag = (value: number): number => (value << 1) ^ (value >> 31);

/** The bytes `writeVarInt` writes for `value`. */
export function sizeOfVarInt(value: number): number {
  let rest = zigZag(value);
  let bytes = 1;
  while ((rest & 0xffffff80) !== 0) {
    bytes += 1;
    rest >>>= 7;
  }
  return bytes;
}

/** Writes `value` at `offset`; returns the offset after it. */
export function writeVarInt(buf: Buffer, offset: number, value: number): number {
  let rest = zigZag(value);
  while ((rest & 0xffffff80) !== 0) {
    buf[offset++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  buf[offset++] = rest & 0x7f;
  return offset;
}

/** Reads a varint at `cursor.at`, moving it past. */
export function readVarInt(buf: Buffer, cursor: { at: number }): number {
  let value = 0;
  let shift = 0;
  let byte: number;
  do {
    byte = buf[cursor.at++]!;
    value |= (byte & 0x7f) << shift;
    shift += 7;
  } while ((byte & 0x80) !== 0);
  return (value >>> 1) ^ -(value & 1);
}
