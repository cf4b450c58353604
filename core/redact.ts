/**
 * Record keys and values stay out of logs and error messages (and so out of Temporal failures,
 * which carry the messages of the errors activities throw) unless the flow says `logKeys: true`.
 * A key is shown as a short hash instead (`#1a2b3c4d`: the same key always gets the same hash, so
 * a log line can still be matched against `inspect --key`'s output); an error of user code (a
 * fold's, a codec's: JSON.parse quotes the bytes) whose message may quote the record is replaced by
 * one that keeps only its class name (WithheldMessageError). A worker process runs one flow, so
 * the switch is per process: the worker sets it from the flow's `logKeys` before anything is folded.
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

/** What a message shows in place of text that may quote a record, unless the flow has `logKeys`. */
export const REDACTED = '[redacted: logKeys is off]';

/**
 * Whether an error's message is known to hold nothing of a record's key or value. Ours
 * (KafkaFlowError: built with showKey and with causes passed through `withheld`, so the whole chain
 * is safe); the Kafka client's (`KafkaJS…`: broker answers and connection state); Node's system
 * errors (a failed syscall: `connect ECONNREFUSED 127.0.0.1:9092`) — each of the last two only if
 * its own cause is safe too (kafkajs copies the message of an error it wraps). Anything else may
 * come from user code (a fold, a codec, a filter) and may quote the record: not safe.
 */
export function isSafeError(err: unknown, depth = 0): boolean {
  if (err instanceof KafkaFlowError) return true;
  if (!(err instanceof Error) || depth > 8) return false;
  const infrastructure = err.name.startsWith('KafkaJS') || typeof (err as { syscall?: unknown }).syscall === 'string';
  if (!infrastructure) return false;
  const cause = (err as { cause?: unknown }).cause ?? (err as { originalError?: unknown }).originalError;
  return cause === undefined || isSafeError(cause, depth + 1);
}

/** The class name of a thrown value (`typeof` for what is not an Error). */
function className(thrown: unknown): string {
  return thrown instanceof Error ? thrown.name : typeof thrown;
}

/**
 * Stands for an error whose message may quote a record's key or value (a fold's or a codec's
 * error): only its class name is kept in the message, and its stack keeps the original's frames
 * (code locations, no data) under that message. The original stays reachable as `original`, not
 * enumerable: loggers copying an error's fields and Temporal's failure converter (which follows
 * `message`, `stack` and `cause`) do not see it. Set `logKeys: true` on the flow to see the
 * original message everywhere.
 */
export class WithheldMessageError extends KafkaFlowError {
  readonly originalName: string;
  declare readonly original: unknown;
  constructor(original: unknown) {
    const name = className(original);
    super('WITHHELD', `${name}: ${REDACTED} (its message may quote the record; set logKeys: true on the flow to see it)`);
    this.originalName = name;
    hiddenProperty(this, 'original', original);
    const stack = original instanceof Error ? original.stack : undefined;
    const frames = stack?.split('\n').filter((line) => /^\s+at /.test(line));
    if (frames !== undefined && frames.length > 0) this.stack = `${this.name}: ${this.message}\n${frames.join('\n')}`;
  }
}

/**
 * `cause` itself with logKeys or when its message is safe (isSafeError); otherwise a
 * WithheldMessageError in its place. What the errors of this project keep as their `cause` and
 * quote in their message, and what the flow's logger logs as `err`.
 */
export function withheld(cause: unknown): unknown {
  return cause === undefined || logKeys || isSafeError(cause) ? cause : new WithheldMessageError(cause);
}

/** The text of a (withheld) cause for a message: an Error's message, anything else as a string. */
export function causeText(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/** A hidden property of the errors whose message withholds the cause's: the message with it. */
const UNREDACTED = Symbol('unredactedMessage');

/**
 * Records on `err` the message it would have with logKeys (only when that differs), for the one
 * place that may show it: a dead letter, which carries the record itself anyway.
 */
export function keepUnredactedMessage(err: Error, unredacted: string): void {
  if (unredacted !== err.message) hiddenProperty(err, UNREDACTED, unredacted);
}

/** The message of `err` as it would read with logKeys (see keepUnredactedMessage). */
export function unredactedMessage(err: Error): string {
  return (err as Error & { [UNREDACTED]?: string })[UNREDACTED] ?? err.message;
}

/**
 * Defines `name` on `target` as a non-enumerable property: code reads it, but loggers that copy an
 * error's own properties (pino's err serializer) and JSON do not.
 */
export function hiddenProperty<T extends object>(target: T, name: string | symbol, value: unknown): void {
  Object.defineProperty(target, name, { value, enumerable: false, writable: false, configurable: true });
}
