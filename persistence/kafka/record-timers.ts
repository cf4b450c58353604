/**
 * A snapshot record's pending key timers, read from its bytes without decoding its state: what
 * the local store's due-time index is kept from (due-index.ts). The envelope as this engine writes
 * it has them before the value (`{"offset":…,"metadata":"","timers":[…],"value":…}`,
 * snapshot-format.ts): only that list is parsed. A record laid out otherwise (another writer's)
 * is parsed in full; a delete marker, a record without timers or one that does not parse has none
 * (its key then reads as any other: a record that cannot be decoded stops the partition there).
 */
import { Compressor } from '../../core/codec/compressor';
import { timersFromJson } from '../../core/key-timers-json';
import type { KeyTimer } from '../../core/persistence-types';

const TIMERS_AT = Buffer.from(',"metadata":"","timers":');
const OFFSET_PREFIX = Buffer.from('{"offset":');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = 0x5b;
const CLOSE = 0x5d;
/** Decompresses only (the threshold does not matter for reading). */
const framing = new Compressor();

/** The timers of a snapshot record's value bytes (as the snapshot topic and the local store hold them). */
export function recordTimers(bytes: Uint8Array): readonly KeyTimer[] | undefined {
  let envelope: Uint8Array;
  let start = framing.uncompressedStart(bytes);
  if (start !== undefined) envelope = bytes;
  else {
    try {
      envelope = framing.decompress(bytes);
    } catch {
      return undefined;
    }
    start = 0;
  }
  return envelopeTimers(envelope, start);
}

/** The timers of the envelope starting at `start`. */
export function envelopeTimers(bytes: Uint8Array, start = 0): readonly KeyTimer[] | undefined {
  const list = timersSpan(bytes, start);
  try {
    if (list === 'none') return undefined;
    const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (list !== undefined) return timersFromJson(JSON.parse(b.toString('utf8', list[0], list[1])));
    const parsed = JSON.parse(b.toString('utf8', start)) as { timers?: unknown } | null;
    return parsed?.timers === undefined ? undefined : timersFromJson(parsed.timers);
  } catch {
    return undefined;
  }
}

/**
 * Where the envelope's timers list is ([from, to)), 'none' when it is laid out as ours without
 * one, undefined when it is laid out otherwise (parse it in full).
 */
function timersSpan(bytes: Uint8Array, start: number): readonly [number, number] | 'none' | undefined {
  if (!startsWith(bytes, start, OFFSET_PREFIX)) return undefined;
  let at = start + OFFSET_PREFIX.length;
  while (at < bytes.length && bytes[at]! >= 0x30 && bytes[at]! <= 0x39) at++;
  if (!startsWith(bytes, at, TIMERS_AT)) {
    // Ours without timers: `,"metadata":"","value":` or a delete marker.
    return startsWith(bytes, at, TIMERS_AT.subarray(0, 15)) ? 'none' : undefined;
  }
  const from = at + TIMERS_AT.length;
  if (bytes[from] !== OPEN) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN) depth++;
    else if (c === CLOSE && --depth === 0) return [from, i + 1];
  }
  return undefined;
}

function startsWith(bytes: Uint8Array, at: number, expected: Uint8Array): boolean {
  if (bytes.length - at < expected.length) return false;
  for (let i = 0; i < expected.length; i++) if (bytes[at + i] !== expected[i]) return false;
  return true;
}
