// Loads `.ts` files for the CLI and the project's scripts: esbuild (the compiler tsx uses) turns a
// file into CommonJS once, and the result is cached on disk by the file's path and content, so a
// start compiles nothing that did not change. Only `.ts` loading is hooked: tsx also hooks every
// `.js` file and every module resolution, which doubled the time to load the dependencies
// (≈ 0.5 s of CPU at each worker start, measured; docs/design.md). Users' flow modules that
// need what only tsx does (ESM-only packages, `./x.js` imports of `.ts` files, `.mts`) load
// through tsx: workers/cli/flow-module.ts falls back to it.
const Module = require('node:module');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
// In the temporary directory (TMPDIR), as tsx keeps its cache.
const cacheDir = path.join(os.tmpdir(), `kafka-flow-temporal-ts-${uid}`);
const esbuildVersion = require('esbuild/package.json').version;
let esbuild; // loaded on the first file not in the cache

/** The CommonJS code of a TypeScript file: from the cache, or compiled (and cached) now. */
function compile(filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const key = crypto.createHash('sha256').update(`${esbuildVersion}\0${process.version}\0${filename}\0`).update(source).digest('hex').slice(0, 40);
  const cached = path.join(cacheDir, `${key}.js`);
  try {
    return fs.readFileSync(cached, 'utf8');
  } catch {
    // not compiled yet
  }
  esbuild ??= require('esbuild');
  const { code } = esbuild.transformSync(source, {
    loader: 'ts',
    format: 'cjs',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    sourcefile: filename,
    sourcemap: 'inline',
  });
  try {
    fs.mkdirSync(cacheDir, { recursive: true });
    const tmp = `${cached}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, code);
    fs.renameSync(tmp, cached); // atomic: a process starting meanwhile reads all of it or nothing
  } catch {
    // a read-only or full disk: compiled again at the next start, nothing else changes
  }
  return code;
}

// Node's own module compile, taken before bin/compile-cache.js replaces it: only Node's registers a
// file's inline source map, so `.ts` files bypass the code cache and keep their TypeScript lines.
const nodeCompile = Module.prototype._compile;

if (!Module._extensions['.ts']) {
  Module._extensions['.ts'] = (module, filename) => nodeCompile.call(module, compile(filename), filename);
  // Stack traces show the TypeScript file and line (each compiled file carries its source map).
  process.setSourceMapsEnabled(true);
}

module.exports = { compile, cacheDir };
