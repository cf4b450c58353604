// The chaos run voids itself when the code its workers load changes during the run (CheckoutWatch):
// an edit in a product folder or a root source counts, once per file; build caches and logs do not.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CheckoutWatch } from '../../../chaos/checkout-watch';

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('CheckoutWatch', () => {
  let root: string;
  let watch: CheckoutWatch | undefined;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-checkout-'));
    for (const dir of ['flow', 'chaos', '.cache', 'docs']) fs.mkdirSync(path.join(root, dir), { recursive: true });
    fs.writeFileSync(path.join(root, 'flow', 'persist-plan.ts'), 'export const a = 1;\n');
  });

  afterEach(() => {
    watch?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('records a change to what the workers load, once per file', async () => {
    watch = new CheckoutWatch(root).start();
    fs.writeFileSync(path.join(root, 'flow', 'persist-plan.ts'), 'export const a = 2;\n');
    fs.writeFileSync(path.join(root, 'flow', 'persist-plan.ts'), 'export const a = 1;\n'); // put back: still a change
    fs.writeFileSync(path.join(root, 'chaos', 'flow.ts'), 'export {};\n');
    fs.writeFileSync(path.join(root, 'define-flow.ts'), 'export {};\n');
    await settle();
    expect([...watch.changes].sort()).toEqual([path.join('flow', 'persist-plan.ts'), 'define-flow.ts', path.join('chaos', 'flow.ts')].sort());
  });

  it('leaves out caches, docs, other files and dotfiles at the root, and the chaos driver', async () => {
    watch = new CheckoutWatch(root).start();
    fs.writeFileSync(path.join(root, '.cache', 'bundle.js'), 'x');
    fs.writeFileSync(path.join(root, 'docs', 'notes.md'), 'x');
    fs.writeFileSync(path.join(root, 'README.md'), 'x');
    fs.writeFileSync(path.join(root, '.jest-results.json'), '{}'); // a jest run's totals
    fs.writeFileSync(path.join(root, 'chaos', 'report.ts'), 'x'); // the driver's own code: not the workers'
    await settle();
    expect(watch.changes).toEqual([]);
  });
});
