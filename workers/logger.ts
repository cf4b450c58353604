import type { Logger as TemporalLogger, LogLevel, LogMetadata } from '@temporalio/common';
import pino from 'pino';
import type { LogLevelName } from '../config/env';
import type { Logger } from '../core/logger';

/** Structured JSON logs on stderr (one line per event), at `level` (the worker's `LOG_LEVEL`, config/env). */
export function createLogger(bindings: Record<string, unknown>, level: LogLevelName): Logger & pino.Logger {
  return pino({ level, base: bindings }, pino.destination(2));
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
 * warn: its INFO narrates every worker state change and workflow bundle).
 */
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
