import type { Logger as TemporalLogger, LogLevel, LogMetadata } from '@temporalio/common';
import pino from 'pino';
import type { Logger } from '../flow/logger';

/** Structured JSON logs on stderr (one line per event); `LOG_LEVEL` sets the level (default info). */
export function createLogger(bindings: Record<string, unknown>): Logger & pino.Logger {
  return pino({ level: process.env.LOG_LEVEL ?? 'info', base: bindings }, pino.destination(2));
}

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The Temporal SDK's logs through the same pino logger, at `TEMPORAL_LOG_LEVEL` (default WARN:
 * its INFO narrates every worker state change and workflow bundle).
 */
export function temporalLogger(log: pino.Logger): TemporalLogger {
  const sdk = log.child({ component: 'temporal' }, { level: (process.env.TEMPORAL_LOG_LEVEL ?? 'warn').toLowerCase() });
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
