// How the CLI loads TypeScript (bin/ts-loader.js), in real child processes: compiled once and cached
// by content (an edit is never served stale, even with the same size and mtime), TypeScript lines
// in stack traces, a worker's modules without the Cassandra driver unless the flow uses Cassandra,
// and flow modules that need tsx's hooks loaded through them.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.join(__dirname, '../../..');
const loader = path.join(root, 'bin/ts-loader.js');

let dir: string;
let cache: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-ts-loader-'));
  cache = path.join(dir, `kafka-flow-temporal-ts-${process.getuid?.() ?? 'user'}`); // under TMPDIR=dir
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function run(script: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(loader)});\n${script}`], {
    cwd: root,
    env: { ...process.env, TMPDIR: dir },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('a .ts file is compiled once, then served from the cache until its content changes', () => {
  const file = path.join(dir, 'answer.ts');
  fs.writeFileSync(file, 'const n: number = 41;\nexport const answer = n + 1;\n');
  const load = `console.log(require(${JSON.stringify(file)}).answer)`;
  expect(run(load).stdout.trim()).toBe('42');
  expect(fs.readdirSync(cache)).toHaveLength(1);
  expect(run(load).stdout.trim()).toBe('42');
  expect(fs.readdirSync(cache)).toHaveLength(1); // the second start compiled nothing

  // Same size, same mtime, other content: still the new code.
  const { atime, mtime } = fs.statSync(file);
  fs.writeFileSync(file, 'const n: number = 42;\nexport const answer = n + 1;\n');
  fs.utimesSync(file, atime, mtime);
  expect(run(load).stdout.trim()).toBe('43');
  expect(fs.readdirSync(cache)).toHaveLength(2);
});

test('stack traces point at the TypeScript source line', () => {
  const file = path.join(dir, 'boom.ts');
  fs.writeFileSync(file, 'interface Shape {\n  n: number;\n}\nconst s: Shape = { n: 1 };\nexport function boom(): never {\n  throw new Error("boom " + s.n);\n}\n');
  const r = run(`try { require(${JSON.stringify(file)}).boom() } catch (e) { console.log(e.stack) }`);
  expect(r.stdout).toContain(`${file}:6:`);
});

test('an unwritable cache directory only costs a compile per start', () => {
  fs.writeFileSync(cache, 'not a directory');
  const file = path.join(dir, 'ok.ts');
  fs.writeFileSync(file, 'export const ok: boolean = true;\n');
  const r = run(`console.log(require(${JSON.stringify(file)}).ok)`);
  expect({ status: r.status, out: r.stdout.trim() }).toEqual({ status: 0, out: 'true' });
});

test("a Kafka flow's worker does not load the Cassandra driver; a Cassandra flow's inspect does", () => {
  const loaded = (flow: string, extra = '') =>
    run(
      `require('./cli.ts'); require('./workers/worker.ts'); require(${JSON.stringify(flow)}); ${extra}` +
        `console.log(Object.keys(require.cache).some((k) => k.includes('/node_modules/cassandra-driver/')))`,
    ).stdout.trim();
  expect(loaded(path.join(root, 'examples/sales/flow.ts'))).toBe('false');
  expect(loaded(path.join(root, 'examples/sales/flow.ts'), "require('./persistence/cassandra/index.ts');")).toBe('true');
});

test("a flow module that imports './helper.js' meaning helper.ts loads through tsx", () => {
  fs.writeFileSync(path.join(dir, 'helper.ts'), "export const topic: string = 'orders';\n");
  fs.writeFileSync(
    path.join(dir, 'flow.ts'),
    `import { defineFlow } from ${JSON.stringify(path.join(root, 'index'))};\nimport { topic } from './helper.js';\n` +
      "export default defineFlow({ name: 'nodenext-style', groupId: 'g', topics: [topic], fold: (n: number | undefined) => (n ?? 0) + 1, persistence: { backend: 'memory' } });\n",
  );
  const r = run(`const { loadFlowModule } = require('./workers/cli/flow-module.ts'); const f = loadFlowModule(${JSON.stringify(path.join(dir, 'flow.ts'))}); console.log(f.name, f.topics.join())`);
  expect({ status: r.status, out: r.stdout.trim(), err: r.stderr }).toEqual({ status: 0, out: 'nodenext-style orders', err: '' });
});

test('the CLI starts with the loader (help lists the commands)', () => {
  const out = execFileSync(process.execPath, [path.join(root, 'bin/kafka-flow-temporal.js'), '--help'], { env: { ...process.env, TMPDIR: dir }, encoding: 'utf8' });
  for (const command of ['worker', 'status', 'inspect', 'infra']) expect(out).toContain(command);
});

describe("with V8's code cache (bin/compile-cache.js, as the CLI starts)", () => {
  const compileCache = path.join(root, 'bin/compile-cache.js');
  // run() requires the loader first, then the cache, as bin/kafka-flow-temporal.js does; `.ts` files
  // bypass the cache (only Node's own compile registers their source maps).
  const runCached = (script: string) => run(`require(${JSON.stringify(compileCache)});\n${script}`);

  test('an edited .ts file runs its new code, and traces still point at the TypeScript line', () => {
    const file = path.join(dir, 'cached.ts');
    fs.writeFileSync(file, 'const n: number = 1;\nexport function value(): number {\n  if (n > 5) throw new Error("big");\n  return n;\n}\n');
    const load = `const m = require(${JSON.stringify(file)}); try { console.log(m.value()) } catch (e) { console.log(e.stack) }`;
    expect(runCached(load).stdout.trim()).toBe('1');
    expect(runCached(load).stdout.trim()).toBe('1');
    expect(fs.readdirSync(dir).some((name) => name.startsWith('v8-compile-cache'))).toBe(true);
    const { atime, mtime } = fs.statSync(file);
    fs.writeFileSync(file, 'const n: number = 9;\nexport function value(): number {\n  if (n > 5) throw new Error("big");\n  return n;\n}\n');
    fs.utimesSync(file, atime, mtime);
    expect(runCached(load).stdout).toContain(`${file}:3:`);
  });

  test('DISABLE_V8_COMPILE_CACHE=1 turns it off', () => {
    const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(compileCache)}); console.log('ok')`], {
      cwd: root,
      env: { ...process.env, TMPDIR: dir, DISABLE_V8_COMPILE_CACHE: '1' },
      encoding: 'utf8',
    });
    expect(r.stdout.trim()).toBe('ok');
    expect(fs.readdirSync(dir).some((name) => name.startsWith('v8-compile-cache'))).toBe(false);
  });
});
