import { z } from 'zod';
import { ConfigError } from '../config/errors';

/** Milliseconds, or text such as '500ms', '1s', '1 min', '10 minutes', '3m', '1h'. */
export type Duration = number | string;

/** A Duration in an options schema (its text is parsed, with a ConfigError naming the option, by toMillis). */
export const durationSchema = z.union([z.number().nonnegative(), z.string().min(1)]);

const UNITS: Record<string, number> = {
  ms: 1, msec: 1, millisecond: 1, milliseconds: 1,
  s: 1_000, sec: 1_000, secs: 1_000, second: 1_000, seconds: 1_000,
  m: 60_000, min: 60_000, mins: 60_000, minute: 60_000, minutes: 60_000,
  h: 3_600_000, hr: 3_600_000, hour: 3_600_000, hours: 3_600_000,
  d: 86_400_000, day: 86_400_000, days: 86_400_000,
};

/** Parses a Duration into milliseconds; throws ConfigError naming `what` when it is not one. */
export function toMillis(value: Duration, what: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value;
  } else {
    const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
    const factor = match ? UNITS[(match[2] || 'ms').toLowerCase()] : undefined;
    if (match && factor !== undefined) return Number(match[1]) * factor;
  }
  throw new ConfigError(`${what} must be a duration (milliseconds, or text like '1s', '1 min'); got ${JSON.stringify(value)}`);
}
