// V8's code cache for the JavaScript modules the CLI loads (the Temporal SDK, kafkajs, pino, zod…):
// a start then skips most of the parsing and compiling it did at every start (docs/design.md).
// Required after bin/ts-loader.js, whose `.ts` files bypass it to keep their source maps. Node ≥ 22.1 has it built in (`module.enableCompileCache`,
// cached in the temporary directory); on Node 20 `v8-compile-cache` does the same, cached under the
// temporary directory by file and content (an edited file is compiled again; a cache that cannot
// be written or read costs a compile, nothing else). DISABLE_V8_COMPILE_CACHE=1 turns both off.
if (!process.env.DISABLE_V8_COMPILE_CACHE) {
  const Module = require('node:module');
  if (typeof Module.enableCompileCache === 'function') Module.enableCompileCache();
  else require('v8-compile-cache');
}
