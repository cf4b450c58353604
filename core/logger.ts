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
