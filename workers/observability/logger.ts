import type { Logger as TemporalLogger, LogLevel, LogMetadata } from '@temporalio/common';
import pino from 'pino';
import type { LogLevelName } from '../../config/env';
import type { Logger } from '../../core/logger';

/**
 * Structured JSON logs on stderr (one line per event), at `level` (the worker's `LOG_LEVEL`,
 * config/env). Written synchronously: a worker logs per persist, not per record, and a line must
 * be out before a fatal error's line (bin/) or a process.exit — never after or lost.
 */
export function createLogger(bindings: Record<string, unknown>, level: LogLevelName): Logger & pino.Logger {
  return pino({ level, base: bindings }, pino.destination({ dest: 2, sync: true }));
}

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The Temporal SDK's logs through the same pino logger, at `level` (`TEMPORAL_LOG_LEVEL`, default
 * warn: its INFO narrates every worker state change and workflow bundle). Temporal core's (Rust)
 * logs come the same way when the runtime forwards them (`temporalCoreLogging`), marked
 * `sdkComponent: 'core'`.
 */
/** What Temporal core logs, at `level`'s threshold (core has no fatal or silent: it logs errors; pino drops what it must). */
const CORE_LEVEL: Record<LogLevelName, LogLevel> = {
  trace: 'TRACE',
  debug: 'DEBUG',
  info: 'INFO',
  warn: 'WARN',
  error: 'ERROR',
  fatal: 'ERROR',
  silent: 'ERROR',
};

/**
 * Runtime.install's `telemetryOptions.logging`: Temporal core's logs forwarded to the runtime's
 * logger (temporalLogger) instead of printed by core on the console in its own format; core's own
 * crates at `level`, everything else it links at ERROR (the SDK's default split).
 */
export function temporalCoreLogging(level: LogLevelName): { forward: Record<string, never>; filter: { core: LogLevel; other: LogLevel } } {
  return { forward: {}, filter: { core: CORE_LEVEL[level], other: 'ERROR' } };
}

export function temporalLogger(log: pino.Logger, level: LogLevelName): TemporalLogger {
  const sdk = log.child({ component: 'temporal' }, { level });
  const at = (level: LogLevel) => (message: string, meta?: LogMetadata) => sdk[PINO_LEVEL[level]](meta ?? {}, message);
  return {
    log: (level, message, meta) => at(level)(message, meta),
    trace: at('TRACE'),
    debug: at('DEBUG'),
    info: at('INFO'),
    warn: at('WARN'),
    error: at('ERROR'),
  };
}
