#!/usr/bin/env node
// The CLI entry. The project (and users' flow modules) are TypeScript; tsx compiles them on load.
// kafkajs warns at every producer about a partitioner change from 2019; we use its default on purpose.
process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';
require('tsx/cjs');
require('../cli.ts')
  .main(process.argv)
  .catch((err) => {
    // Known, typed errors print one line; anything else keeps its stack for a bug report.
    const { formatFatal } = require('../config/errors.ts');
    process.stderr.write(formatFatal(err) + '\n');
    process.exit(typeof err?.exitCode === 'number' ? err.exitCode : 1);
  });
