/**
 * Record keys and values stay out of logs and error messages (and so out of Temporal failures,
 * which carry the messages of the errors activities throw) unless the flow says `logKeys: true`.
 * A key is shown as a short hash instead (`#1a2b3c4d`: the same key always gets the same hash, so
 * a log line can still be matched against `inspect --key`'s output); an error of a codec, whose
 * message may quote the record's bytes (JSON.parse does), is replaced by one that keeps only its
 * class name. A worker process runs one flow, so the switch is per process: the worker sets it
 * from the flow's `logKeys` before anything is folded.
 */
import { createHash } from 'node:crypto';
import { KafkaFlowError } from '../config/errors';

let logKeys = false;

/** Turns the showing of keys and values on (the flow's `logKeys: true`) or off (the default). */
export function setLogKeys(on: boolean): void {
  logKeys = on;
}

export function logsKeys(): boolean {
  return logKeys;
}

/** The first 8 hex digits of the key's SHA-256. */
export function keyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

function shorten(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** A key as logs and messages show it: `"the key"` with logKeys, else `#<hash>`. */
export function showKey(key: string): string {
  return logKeys ? JSON.stringify(shorten(key)) : `#${keyHash(key)}`;
}

/** Up to `max` keys, shown as `showKey` does, `, …` when there are more. */
export function showKeys(keys: readonly string[], max = 5): string {
  return keys.slice(0, max).map(showKey).join(', ') + (keys.length > max ? ', …' : '');
}

/**
 * Stands for an error whose message may quote a record's key or value (a codec's decode error):
 * only its class name is kept. Set `logKeys: true` on the flow to see the original.
 */
export class WithheldMessageError extends KafkaFlowError {
  readonly originalName: string;
  constructor(original: unknown) {
    const name = original instanceof Error ? original.name : typeof original;
    super('WITHHELD', `${name} (its message is withheld: it may quote the record; set logKeys: true on the flow to see it)`);
    this.originalName = name;
  }
}

/** `cause` itself with logKeys; otherwise a WithheldMessageError in its place. */
export function withheld(cause: unknown): unknown {
  return logKeys ? cause : new WithheldMessageError(cause);
}

/**
 * Defines `name` on `target` as a non-enumerable property: code reads it, but loggers that copy an
 * error's own properties (pino's err serializer) and JSON do not.
 */
export function hiddenProperty<T extends object>(target: T, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, enumerable: false, writable: false, configurable: true });
}
