import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../core/logger';
import { type BuildWorkflowBundle, bundlerVersions } from './workflow-bundle-build';
import { type CacheLookup, cacheFile, readCachedBundle, sha256, writeCachedBundle } from './workflow-bundle-cache';

export interface WorkflowBundleOptions {
  /** The workflows module (what `Worker.create` takes as `workflowsPath`). */
  workflowsPath: string;
  /** Where bundles are cached (`KFT_WORKFLOW_BUNDLE_DIR`); undefined: build at every start, cache nothing. */
  cacheDir: string | undefined;
  build: BuildWorkflowBundle;
  /** Workflow interceptor modules bundled with the workflows (Temporal's OpenTelemetry ones when tracing is on); part of the key. */
  workflowInterceptorModules?: readonly string[];
  logger: Logger;
  /** The bundler's versions (part of the key); the installed ones by default. */
  versions?: Record<string, string>;
}

/** What a worker passes to `Worker.create` as `workflowBundle`, and where it came from. */
export interface WorkflowBundle {
  code: string;
  source: 'cache' | 'built';
}

/**
 * The workflow bundle a worker runs: the cached one when every file webpack read to make it (and
 * every path it found absent) is as it was, else a fresh build, then cached for the next start.
 * Bundling costs seconds of CPU at every worker start; reading and checking the cache, tens of
 * milliseconds. The cache never fails a worker: a cache that cannot be read, parsed or written is
 * logged and the bundle built in memory, as `workflowsPath` would.
 */
export async function loadWorkflowBundle(o: WorkflowBundleOptions): Promise<WorkflowBundle> {
  const interceptors = o.workflowInterceptorModules ?? [];
  if (o.cacheDir === undefined) return { code: (await o.build(o.workflowsPath, interceptors)).code, source: 'built' };
  // Interceptor modules join the key only when there are some: a bundle with them is another bundle.
  const key = sha256(
    JSON.stringify({ workflowsPath: o.workflowsPath, versions: o.versions ?? bundlerVersions(), ...(interceptors.length > 0 ? { workflowInterceptorModules: interceptors } : {}) }),
  );
  const file = cacheFile(o.cacheDir, key);
  const started = performance.now();
  let cached: CacheLookup;
  try {
    cached = readCachedBundle(file, key);
  } catch (err) {
    cached = { miss: 'corrupt', why: `cannot be checked: ${String(err)}` };
  }
  if ('code' in cached) {
    o.logger.debug({ file, ms: Math.round(performance.now() - started) }, 'workflow bundle from the cache');
    return { code: cached.code, source: 'cache' };
  }
  o.logger[cached.miss === 'absent' ? 'debug' : 'info']({ file, why: cached.why }, 'building the workflow bundle (no usable cached one)');
  const buildStartedAt = fileClockNow(o.cacheDir);
  const built = await o.build(o.workflowsPath, interceptors);
  try {
    const notCached = writeCachedBundle(file, key, built, buildStartedAt);
    if (notCached) o.logger.info({ file, why: notCached }, 'workflow bundle not cached');
  } catch (err) {
    o.logger.info({ file, err }, 'could not cache the workflow bundle (the worker runs on the one it built)');
  }
  return { code: built.code, source: 'built' };
}

/**
 * Now, on the clock files are stamped with: the modification time of a file written in `dir`.
 * The filesystem stamps files from a coarse kernel clock that can lag `Date.now()` by a few
 * milliseconds, so a source edited right after `Date.now()` was read could look older than the
 * build (a stale bundle cached). Unwritable `dir` (the cache write fails later anyway): a second
 * before `Date.now()`.
 */
function fileClockNow(dir: string): number {
  try {
    fs.mkdirSync(dir, { recursive: true });
    const marker = path.join(dir, `.clock-${process.pid}`);
    fs.writeFileSync(marker, '');
    const at = fs.statSync(marker).mtimeMs;
    fs.rmSync(marker, { force: true });
    return at;
  } catch {
    return Date.now() - 1000;
  }
}
