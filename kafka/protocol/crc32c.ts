/**
 * CRC-32C (Castagnoli), the checksum of a v2 record batch, over `buf[start, end)` without a view
 * of the range: slicing by 8 (eight bytes a step), the values of kafkajs's byte-at-a-time table
 * (`recordBatch/crc32C`).
 */

const TABLES = (() => {
  const t0 = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t0[n] = c;
  }
  const tables = [t0];
  for (let t = 1; t < 8; t++) {
    const prev = tables[t - 1]!;
    const table = new Int32Array(256);
    for (let n = 0; n < 256; n++) table[n] = (prev[n]! >>> 8) ^ t0[prev[n]! & 0xff]!;
    tables.push(table);
  }
  return tables as [Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array];
})();

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

export function crc32c(buf: Buffer, start: number, end: number): number {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = TABLES;
  let crc = -1;
  let i = start;
  if (LITTLE_ENDIAN) {
    // Byte by byte to a 4-byte boundary of the underlying memory, then two aligned 32-bit
    // little-endian words (eight bytes) per step.
    while (i < end && ((buf.byteOffset + i) & 3) !== 0) crc = t0[(crc ^ buf[i++]!) & 0xff]! ^ (crc >>> 8);
    const steps = (end - i) >>> 3;
    if (steps > 0) {
      const words = new Int32Array(buf.buffer, buf.byteOffset + i, steps * 2);
      for (let j = 0; j < words.length; j += 2) {
        const lo = crc ^ words[j]!;
        const hi = words[j + 1]!;
        crc =
          t7[lo & 0xff]! ^
          t6[(lo >>> 8) & 0xff]! ^
          t5[(lo >>> 16) & 0xff]! ^
          t4[lo >>> 24]! ^
          t3[hi & 0xff]! ^
          t2[(hi >>> 8) & 0xff]! ^
          t1[(hi >>> 16) & 0xff]! ^
          t0[hi >>> 24]!;
      }
      i += steps * 8;
    }
  } else {
    for (const fast = end - 8; i <= fast; i += 8) {
      const lo = crc ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
      crc =
        t7[lo & 0xff]! ^
        t6[(lo >>> 8) & 0xff]! ^
        t5[(lo >>> 16) & 0xff]! ^
        t4[lo >>> 24]! ^
        t3[buf[i + 4]!]! ^
        t2[buf[i + 5]!]! ^
        t1[buf[i + 6]!]! ^
        t0[buf[i + 7]!]!;
    }
  }
  while (i < end) crc = t0[(crc ^ buf[i++]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}
