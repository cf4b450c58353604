/**
 * The local store's due-time index (docs/design.md, "Key timers of keys out of memory"): one entry
 * per pending key timer, beside the entries, so that a partition whose keys mostly live in the
 * store (a bounded state cache) can ask which keys have a timer due without holding them. An entry
 * is a key only — clock (1 byte), due time (8 bytes, big-endian with the sign bit flipped, so the
 * bytes sort as the times do, negative ones included), the flow key (UTF-8) — and LMDB keeps the
 * entries sorted: the keys due at or before a time of a clock are one range read from its start.
 */
import type { KeyTimer, TimeDomain } from '../../core/persistence-types';

const CLOCK_BYTE: Record<TimeDomain, number> = { processing: 0, event: 1 };
const HEAD = 9;
const SIGN = 1n << 63n;

/** The due time as the index sorts it: whole milliseconds, rounded down (a timer is never found late). */
function sortable(at: number): bigint {
  const ms = Math.floor(at);
  const clamped = Math.max(Number.MIN_SAFE_INTEGER, Math.min(ms, Number.MAX_SAFE_INTEGER));
  return BigInt(clamped) + SIGN;
}

function head(time: TimeDomain, at: number, extra: number): Buffer {
  const out = Buffer.allocUnsafe(HEAD + extra);
  out[0] = CLOCK_BYTE[time];
  out.writeBigUInt64BE(sortable(at), 1);
  return out;
}

/** The index entry of one timer of `key`. */
export function dueEntry(key: string, time: TimeDomain, at: number): Buffer {
  const k = Buffer.from(key, 'utf8');
  const out = head(time, at, k.length);
  k.copy(out, HEAD);
  return out;
}

/** The index entries of a key's timers (duplicates, two timers due together, are one entry). */
export function dueEntries(key: string, timers: readonly KeyTimer[] | undefined): Buffer[] {
  if (timers === undefined || timers.length === 0) return [];
  const out: Buffer[] = [];
  const seen = new Set<string>();
  for (const t of timers) {
    const e = dueEntry(key, t.time, t.at);
    const id = e.toString('latin1');
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(e);
  }
  return out;
}

/** What an index entry says. */
export interface DueEntry {
  readonly time: TimeDomain;
  /** The due time, rounded down to the millisecond. */
  readonly at: number;
  readonly key: string;
}

export function readDueEntry(entry: Uint8Array): DueEntry {
  const b = Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength);
  if (b.length < HEAD || b[0]! > 1) throw new RangeError(`not a due-index entry (${b.length} bytes)`);
  return { time: b[0] === 0 ? 'processing' : 'event', at: Number(b.readBigUInt64BE(1) - SIGN), key: b.toString('utf8', HEAD) };
}

/**
 * The range of a clock's entries due after `after` (exclusive; -Infinity: from the clock's first)
 * and at or before `until`: [start, end), for LMDB's getKeys.
 */
export function dueRange(time: TimeDomain, until: number, after = Number.NEGATIVE_INFINITY): { readonly start: Buffer; readonly end: Buffer } {
  const start = after === Number.NEGATIVE_INFINITY ? Buffer.alloc(1, CLOCK_BYTE[time]) : head(time, Math.floor(after) + 1, 0);
  const end = head(time, Math.floor(until) + 1, 0);
  return { start, end };
}

/** The range of a clock's entries due after `after` (exclusive), to its last. */
export function dueAfter(time: TimeDomain, after: number): { readonly start: Buffer; readonly end: Buffer } {
  return { start: dueRange(time, after).end, end: Buffer.alloc(1, CLOCK_BYTE[time] + 1) };
}
