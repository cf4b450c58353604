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
  return { info: redacting(log.info.bind(log)), warn: redacting(log.warn.bind(log)), error: redacting(log.error.bind(log)), debug: redacting(log.debug.bind(log)) };
}
