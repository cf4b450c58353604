/**
 * The checkout the workers run must not change while a run goes on: each worker loads the product
 * code as it is when it starts, so an edit during a run — or a test's "does it fail without the
 * fix?" that checks out older files for a minute — gives the workers started meanwhile other code,
 * and the run measures a mix of versions. (It happened: a worker started while a fix was reverted
 * for a minute lost outputs for the whole run, see docs/experiments/2026-12-04-kafka-mode-lost-outputs.md.)
 * This watches what the workers load and records every change; a run with any is void.
 */
import fs from 'node:fs';
import path from 'node:path';

/** What the workers load: the product's folders, the chaos flow, and the root's sources and manifests. */
export const WORKER_CODE_DIRS = ['activities', 'bin', 'config', 'core', 'flow', 'kafka', 'patches', 'persistence', 'workers', 'workflows'];
/** The files the workers load from folders they otherwise do not: the chaos flow (the rest of chaos/ is the driver's). */
export const WORKER_CODE_FILES = [path.join('chaos', 'flow.ts')];
/** The root's sources and manifests; not its dotfiles (`.jest-results.json`, which every jest run in the checkout writes). */
const ROOT_FILE = /^[^.].*\.(ts|js|json)$/;

export class CheckoutWatch {
  /** Files changed since the watch started (relative to the root), in order, each once. */
  readonly changes: string[] = [];
  private readonly watchers: fs.FSWatcher[] = [];

  constructor(private readonly root: string) {}

  start(): this {
    for (const dir of WORKER_CODE_DIRS) {
      const at = path.join(this.root, dir);
      if (!fs.existsSync(at)) continue;
      this.watchers.push(fs.watch(at, { recursive: true }, (_event, file) => this.changed(path.join(dir, String(file ?? '')))));
    }
    this.watchers.push(
      fs.watch(this.root, (_event, file) => {
        if (file && ROOT_FILE.test(String(file))) this.changed(String(file));
      }),
    );
    // Through its folder: an editor's save may replace the file, which a watch of the file itself would lose.
    for (const file of WORKER_CODE_FILES) {
      const dir = path.dirname(file);
      if (!fs.existsSync(path.join(this.root, dir))) continue;
      this.watchers.push(
        fs.watch(path.join(this.root, dir), (_event, name) => {
          if (name && path.join(dir, String(name)) === file) this.changed(file);
        }),
      );
    }
    return this;
  }

  close(): void {
    for (const w of this.watchers.splice(0)) w.close();
  }

  private changed(file: string): void {
    if (!this.changes.includes(file)) this.changes.push(file);
  }
}
