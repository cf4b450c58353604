#!/usr/bin/env node
// Runs a TypeScript script of this project (benchmarks, examples, recorders), compiled on load as
// the CLI does (bin/ts-loader.js).
// kafkajs warns at every producer about a partitioner change from 2019; we use its default on purpose.
process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';
require('./ts-loader.js');
const path = require('node:path');
const [script, ...rest] = process.argv.slice(2);
if (!script) {
  process.stderr.write('usage: node bin/run-ts.js <script.ts> [args...]\n');
  process.exit(2);
}
process.argv = [process.argv[0], path.resolve(script), ...rest];
require(path.resolve(script));
