/** Turns values to bytes and back. State and input values are JSON by default; pluggable. */
export interface Codec<T> {
  encode(value: T): Buffer;
  /** Optional: the encoding as text whose UTF-8 bytes are `encode`'s (lets a writer skip the Buffer). */
  encodeText?(value: T): string;
  /** Throws on undecodable bytes; callers wrap the failure in a DecodeError with its location. */
  decode(bytes: Buffer): T;
  /**
   * Optional: `decode(bytes.subarray(start, end))` — the same value or the same error — without
   * the view (the engine decodes input values straight from a fetch response with it).
   */
  decodeFrom?(bytes: Buffer, start: number, end: number): T;
}
