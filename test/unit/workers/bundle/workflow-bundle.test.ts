import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../../../core/logger';
import { loadWorkflowBundle, type WorkflowBundleOptions } from '../../../../workers/bundle/workflow-bundle';
import type { BuiltWorkflowBundle } from '../../../../workers/bundle/workflow-bundle-build';

// The workflow bundle cache's keying and validation, with a fake bundler that "reads" two source
// files: a bundle is reused only while every input is as it was, and a cache file that is damaged,
// unwritable or written concurrently never fails the load.

let dir: string;
let cacheDir: string;
let sources: { a: string; b: string; absent: string };
let builds: number;
let lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }>;

const logger: Logger = Object.fromEntries(
  (['debug', 'info', 'warn', 'error'] as const).map((level) => [
    level,
    (fields: unknown, msg?: string) => lines.push({ level, msg: String(msg), fields: fields as Record<string, unknown> }),
  ]),
) as unknown as Logger;

/** A bundler whose code names the build and the sources' content, and whose inputs are a, b (and `absent`, looked for). */
const build = async (_workflowsPath: string): Promise<BuiltWorkflowBundle> => {
  builds++;
  await new Promise((r) => setTimeout(r, 5));
  return {
    code: `/* build ${builds} */ ${fs.readFileSync(sources.a, 'utf8')} ${fs.readFileSync(sources.b, 'utf8')}`,
    files: [sources.a, sources.b],
    absent: [sources.absent],
  };
};

const options = (more: Partial<WorkflowBundleOptions> = {}): WorkflowBundleOptions => ({
  workflowsPath: path.join(dir, 'workflows', 'index.ts'),
  cacheDir,
  build,
  logger,
  versions: { '@temporalio/workflow': '1.0.0' },
  ...more,
});

const cacheFiles = () => (fs.existsSync(cacheDir) ? fs.readdirSync(cacheDir) : []);
const theCacheFile = () => {
  const files = cacheFiles();
  expect(files).toHaveLength(1);
  return path.join(cacheDir, files[0]!);
};
/** Rewrites a source, its mtime set back to what it was: the content is what counts. */
const edit = (file: string, content: string) => {
  const { atime, mtime } = fs.statSync(file);
  fs.writeFileSync(file, content);
  fs.utimesSync(file, atime, mtime);
};

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bundle-'));
  cacheDir = path.join(dir, 'cache');
  fs.mkdirSync(path.join(dir, 'workflows'));
  sources = { a: path.join(dir, 'workflows', 'a.ts'), b: path.join(dir, 'workflows', 'b.ts'), absent: path.join(dir, 'workflows', 'c.ts') };
  fs.writeFileSync(sources.a, 'export const a = 1;');
  fs.writeFileSync(sources.b, 'export const b = 1;');
  const past = new Date(Date.now() - 60_000);
  for (const f of [sources.a, sources.b]) fs.utimesSync(f, past, past);
  builds = 0;
  lines = [];
});

afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

test('the first load builds and caches; the next ones read the cache', async () => {
  const first = await loadWorkflowBundle(options());
  expect(first).toEqual({ code: '/* build 1 */ export const a = 1; export const b = 1;', source: 'built' });
  expect(cacheFiles()).toHaveLength(1);
  for (let i = 0; i < 3; i++) expect(await loadWorkflowBundle(options())).toEqual({ ...first, source: 'cache' });
  expect(builds).toBe(1);
});

test('a changed source file invalidates the bundle: rebuilt with the new content, then cached again', async () => {
  await loadWorkflowBundle(options());
  edit(sources.b, 'export const b = 2;');
  const rebuilt = await loadWorkflowBundle(options());
  expect(rebuilt).toEqual({ code: '/* build 2 */ export const a = 1; export const b = 2;', source: 'built' });
  expect(lines.filter((l) => l.msg.startsWith('building')).at(-1)).toMatchObject({ level: 'info', fields: { why: `${sources.b} changed` } });
  expect(await loadWorkflowBundle(options())).toEqual({ ...rebuilt, source: 'cache' });
  expect(builds).toBe(2);
});

test('a source file deleted, or a file appearing where module resolution found none, invalidates it', async () => {
  await loadWorkflowBundle(options());
  fs.writeFileSync(sources.absent, 'export const c = 1;');
  expect((await loadWorkflowBundle(options())).source).toBe('built');
  fs.rmSync(sources.a);
  await expect(loadWorkflowBundle(options())).rejects.toThrow(/ENOENT/); // the fake build reads it
  expect(lines.at(-1)?.fields.why).toBe(`${sources.a} is gone`);
  expect(builds).toBe(3);
});

test('other bundler versions or another workflows path are another key: rebuilt, the old bundle left alone', async () => {
  await loadWorkflowBundle(options());
  expect((await loadWorkflowBundle(options({ versions: { '@temporalio/workflow': '1.0.1' } }))).source).toBe('built');
  expect((await loadWorkflowBundle(options({ workflowsPath: sources.a }))).source).toBe('built');
  expect(cacheFiles()).toHaveLength(3);
  expect((await loadWorkflowBundle(options())).source).toBe('cache');
});

test.each([
  ['truncated', (file: string) => fs.truncateSync(file, fs.statSync(file).size - 10)],
  ['cut inside its manifest', (file: string) => fs.truncateSync(file, 60)],
  ['empty', (file: string) => fs.writeFileSync(file, '')],
  ['overwritten with other bytes', (file: string) => fs.writeFileSync(file, 'garbage\n{"key":1}\nmore')],
  ['code changed in place', (file: string) => fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('build 1', 'build X'))],
  ['a manifest that is JSON but not one', (file: string) => fs.writeFileSync(file, 'kafka-flow-temporal workflow bundle 1\nnull\ncode')],
  ['a directory', (file: string) => { fs.rmSync(file); fs.mkdirSync(file); }],
])('a cache file %s is rebuilt (logged at info), never a failed load', async (_what, damage) => {
  await loadWorkflowBundle(options());
  const file = theCacheFile();
  damage(file);
  const loaded = await loadWorkflowBundle(options());
  expect(loaded).toEqual({ code: '/* build 2 */ export const a = 1; export const b = 1;', source: 'built' });
  expect(lines.some((l) => l.level === 'info' && l.msg.startsWith('building the workflow bundle'))).toBe(true);
});

test('a cache that cannot be written is logged; the load returns the bundle it built', async () => {
  fs.writeFileSync(cacheDir, 'a file where the directory should be');
  expect((await loadWorkflowBundle(options())).code).toMatch(/build 1/);
  expect((await loadWorkflowBundle(options())).code).toMatch(/build 2/);
  expect(lines.filter((l) => l.msg.startsWith('could not cache'))).toHaveLength(2);
});

test('a source modified while the bundle is built is not cached: the next load builds again', async () => {
  const touching = async (p: string) => {
    const built = await build(p);
    fs.writeFileSync(sources.a, 'export const a = 3;'); // an edit webpack may or may not have seen
    return built;
  };
  expect((await loadWorkflowBundle(options({ build: touching }))).source).toBe('built');
  expect(cacheFiles()).toEqual([]);
  expect(lines.find((l) => l.msg === 'workflow bundle not cached')?.fields.why).toBe(`${sources.a} was modified during the build`);
  expect(await loadWorkflowBundle(options())).toEqual({ code: '/* build 2 */ export const a = 3; export const b = 1;', source: 'built' });
});

test('concurrent loads each get a whole bundle and leave one valid cache file, no temporary files', async () => {
  const loaded = await Promise.all(Array.from({ length: 6 }, () => loadWorkflowBundle(options())));
  for (const l of loaded) expect(l.code).toMatch(/^\/\* build \d \*\/ export const a = 1; export const b = 1;$/);
  expect(cacheFiles()).toHaveLength(1);
  expect((await loadWorkflowBundle(options())).source).toBe('cache');
});

test('no cache directory (KFT_WORKFLOW_BUNDLE_DIR=off): built at every load, nothing written', async () => {
  await loadWorkflowBundle(options({ cacheDir: undefined }));
  expect((await loadWorkflowBundle(options({ cacheDir: undefined }))).source).toBe('built');
  expect(builds).toBe(2);
  expect(fs.existsSync(cacheDir)).toBe(false);
});
