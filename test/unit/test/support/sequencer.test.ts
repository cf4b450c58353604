import fs from 'node:fs';
import path from 'node:path';

// The order jest starts test files in (test/support/sequencer.js): the known long integration
// files first, whatever jest's timing record says or lacks (a clean clone has none).
const root = path.join(__dirname, '../../../..');
const sequencerPath = path.join(root, 'test/support/sequencer.js');
const Sequencer = require(sequencerPath) as {
  new (options: unknown): { sort: (tests: { path: string; context: unknown }[]) => { path: string }[] };
  LONG_FIRST: string[];
  AFTER_CHAOS: string[];
  LONG_NEXT: string[];
};

const integrationFiles = (): string[] =>
  (fs.readdirSync(path.join(root, 'test/integration'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => path.join(root, 'test/integration', f));

const relative = (p: string) => path.relative(root, p).split(path.sep).join('/');

test('without a timing record (a clean clone): the long files first, in their order, then the server-heavy ones, then the other long ones, then the rest largest first', () => {
  // No cache: jest's own order is by file size, which would put the short quick-chaos file last.
  const context = { config: { cache: false }, hasteFS: { getSize: (p: string) => fs.statSync(p).size } };
  const files = integrationFiles();
  const sorted = new Sequencer({}).sort(files.map((p) => ({ path: p, context }))).map((t) => t.path);
  expect(sorted).toHaveLength(files.length);
  // Every listed file exists: a renamed one would silently lose its place.
  const listed = [...Sequencer.LONG_FIRST, ...Sequencer.AFTER_CHAOS, ...Sequencer.LONG_NEXT];
  expect(sorted.slice(0, listed.length).map(relative)).toEqual(listed);
  expect(sorted[0]).toBe(path.join(root, 'test/integration/chaos/quick.test.ts'));
  const sizes = sorted.slice(listed.length).map((p) => fs.statSync(p).size);
  expect(sizes).toEqual([...sizes].sort((a, b) => b - a));
});
