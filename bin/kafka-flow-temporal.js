#!/usr/bin/env node
// A SIGTERM/SIGINT that comes while the CLI is still loading (tsx, the commands, a flow module:
// seconds on a busy machine) is held for `worker`, which then exits 0 without starting
// (workers/cli/early-signal.ts); any other command ends as by the default action.
{
  const early = { signal: undefined };
  const onEarly = (signal) => {
    early.signal ??= signal;
    if (process.argv[2] !== 'worker') process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
  };
  early.release = () => {
    process.off('SIGTERM', onEarly);
    process.off('SIGINT', onEarly);
    return early.signal;
  };
  globalThis[Symbol.for('kafka-flow-temporal.early-signal')] = early;
  process.on('SIGTERM', onEarly);
  process.on('SIGINT', onEarly);
}
// The CLI entry. The project (and users' flow modules) are TypeScript, compiled on load and cached
// (bin/ts-loader.js; a flow module that needs more than that loads through tsx).
// kafkajs warns at every producer about a partitioner change from 2019; we use its default on purpose.
process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';
require('./ts-loader.js');
require('./compile-cache.js'); // after the loader: it keeps Node's compile for `.ts` files
require('../cli.ts')
  .main(process.argv)
  .catch((err) => {
    // Known, typed errors print one line; anything else keeps its stack for a bug report.
    const { formatFatal } = require('../config/errors.ts');
    process.stderr.write(formatFatal(err) + '\n');
    process.exit(typeof err?.exitCode === 'number' ? err.exitCode : 1);
  });
