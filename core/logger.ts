import { withheld } from './redact';

/** A pino-compatible subset: `log.info({ key }, 'message')` or `log.info('message')`. */
export type LogFn = (objOrMessage: unknown, message?: string) => void;

export interface Logger {
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  debug: LogFn;
}

const noop: LogFn = () => {};

export const silentLogger: Logger = { info: noop, warn: noop, error: noop, debug: noop };

/**
 * `log` with the `err` of every line passed through core/redact's `withheld`: an error of user
 * code (a filter's, a fold's that nothing wrapped) whose message may quote a record is logged as a
 * WithheldMessageError (its class name and stack frames) unless the flow has `logKeys`. This
 * project's errors are logged as they are: their messages are safe by construction.
 */
export function redactingLogger(log: Logger): Logger {
  const redacting =
    (fn: LogFn): LogFn =>
    (objOrMessage, message) => {
      if (typeof objOrMessage === 'object' && objOrMessage !== null && 'err' in objOrMessage) {
        const fields = objOrMessage as { err?: unknown };
        const err = withheld(fields.err);
        if (err !== fields.err) objOrMessage = { ...fields, err };
      }
      fn(objOrMessage, message);
    };
  return eachLevel(log, redacting);
}

/** `log` with each level's function wrapped by `wrap`. */
function eachLevel(log: Logger, wrap: (fn: LogFn) => LogFn): Logger {
  return { info: wrap(log.info.bind(log)), warn: wrap(log.warn.bind(log)), error: wrap(log.error.bind(log)), debug: wrap(log.debug.bind(log)) };
}

/**
 * `log` for code that names the fields of its lines itself (a persistence backend: `flow`, topic,
 * partition) when `log` already binds some of them (the worker's logger binds `flow`): a field
 * equal to its bound value is left out, so that a JSON line does not carry the key twice.
 */
export function withoutBoundFields(log: Logger, bound: Readonly<Record<string, unknown>>): Logger {
  const keys = Object.keys(bound);
  const dropping =
    (fn: LogFn): LogFn =>
    (objOrMessage, message) => {
      if (typeof objOrMessage === 'object' && objOrMessage !== null && !(objOrMessage instanceof Error)) {
        const fields = objOrMessage as Record<string, unknown>;
        if (keys.some((k) => k in fields && fields[k] === bound[k])) {
          const kept = { ...fields };
          for (const k of keys) if (kept[k] === bound[k]) delete kept[k];
          objOrMessage = kept;
        }
      }
      fn(objOrMessage, message);
    };
  return eachLevel(log, dropping);
}
