/** Turns values to bytes and back. State and input values are JSON by default; pluggable. */
export interface Codec<T> {
  encode(value: T): Buffer;
  /** Throws on undecodable bytes; callers wrap the failure in a DecodeError with its location. */
  decode(bytes: Buffer): T;
}
