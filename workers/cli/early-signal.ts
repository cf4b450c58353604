/** What bin/kafka-flow-temporal.js holds of a signal that came before the CLI had loaded. */
interface EarlySignal {
  readonly signal: NodeJS.Signals | undefined;
  release(): NodeJS.Signals | undefined;
}

/**
 * Stops holding early signals (the caller has installed its own handlers) and returns the one
 * that came before, if any. Without the bin script (the CLI run in-process, tests) there is none.
 */
export function releaseEarlySignal(): NodeJS.Signals | undefined {
  const early = (globalThis as Record<symbol, EarlySignal | undefined>)[Symbol.for('kafka-flow-temporal.early-signal')];
  return early?.release();
}
