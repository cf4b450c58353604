/**
 * Node's UTF-8 decoding of bytes[start, end) without a view: what `bytes.toString('utf8', start,
 * end)` gives (the WHATWG decoder with replacement — every ill-formed sequence becomes U+FFFD, a
 * BOM is kept), through Buffer's `utf8Slice`, which `toString` calls after its argument checks
 * (in a profile of the input path its wrapper cost as much as the decoding). `start` and `end`
 * must lie within `bytes`.
 */
export function utf8Text(bytes: Buffer, start: number, end: number): string {
  return end <= start ? '' : (bytes as Utf8Sliceable).utf8Slice(start, end);
}

type Utf8Sliceable = Buffer & { utf8Slice(start: number, end: number): string };

if (typeof (Buffer.prototype as Utf8Sliceable).utf8Slice !== 'function') {
  throw new Error("this Node.js has no Buffer.prototype.utf8Slice (core/codec/utf8.ts): replace it with toString('utf8', start, end)");
}
