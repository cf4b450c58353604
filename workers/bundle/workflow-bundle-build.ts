import fs from 'node:fs';
import path from 'node:path';
import { type BundleOptions, bundleWorkflowCode } from '@temporalio/worker';
import type { Logger as TemporalLogger } from '@temporalio/common';

/** webpack's configuration, as `bundleWorkflowCode` hands it to its `webpackConfigHook`. */
type WebpackConfiguration = Parameters<NonNullable<BundleOptions['webpackConfigHook']>>[0];
type WebpackPlugin = NonNullable<WebpackConfiguration['plugins']>[number];

/** The part of a webpack compilation that says what it read. */
interface CompilationInputs {
  fileDependencies: Iterable<string>;
  missingDependencies: Iterable<string>;
}

/**
 * A workflow bundle and every input webpack read to make it: `files`, the files it read (sources,
 * package.json files, source maps the loaders followed); `absent`, the paths it looked for and did
 * not find (module resolution's misses: a file created there later could change what resolves).
 */
export interface BuiltWorkflowBundle {
  code: string;
  files: string[];
  absent: string[];
}

/** `workflowInterceptorModules`: modules of workflow interceptors bundled with the workflows (tracing's). */
export type BuildWorkflowBundle = (workflowsPath: string, workflowInterceptorModules?: readonly string[]) => Promise<BuiltWorkflowBundle>;

/**
 * Bundles the workflows exactly as `Worker.create({ workflowsPath })` would (the same
 * `bundleWorkflowCode` with its defaults), recording webpack's inputs with a plugin on the way.
 */
export function workflowBundleBuilder(logger?: TemporalLogger): BuildWorkflowBundle {
  return async (workflowsPath, workflowInterceptorModules = []) => {
    let inputs: CompilationInputs | undefined;
    const plugin = {
      apply(compiler: { hooks: { afterCompile: { tap(name: string, fn: (c: CompilationInputs) => void): void } } }) {
        compiler.hooks.afterCompile.tap('kafka-flow-temporal-record-inputs', (compilation) => {
          inputs = compilation;
        });
      },
    } as unknown as WebpackPlugin;
    const { code } = await bundleWorkflowCode({
      workflowsPath,
      workflowInterceptorModules: [...workflowInterceptorModules],
      logger,
      webpackConfigHook: (config) => ({ ...config, plugins: [...(config.plugins ?? []), plugin] }),
    });
    if (!inputs) throw new Error('webpack reported no compilation: cannot tell which files the workflow bundle depends on');
    // The entry point bundleWorkflowCode generates lives in memory only; its content follows from
    // the options, which the cache key holds. Everything else webpack read is a real file.
    const files = [...new Set(inputs.fileDependencies)].filter((f) => path.isAbsolute(f) && isFile(f)).sort();
    const absent = [...new Set(inputs.missingDependencies)].filter((f) => path.isAbsolute(f) && !fs.existsSync(f)).sort();
    return { code, files, absent };
  };
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The versions of the tools that turn the sources into a bundle: part of the cache key. */
export function bundlerVersions(): Record<string, string> {
  const workerDir = path.dirname(require.resolve('@temporalio/worker/package.json'));
  const version = (name: string, from?: string) => {
    try {
      const file = require.resolve(`${name}/package.json`, from ? { paths: [from] } : undefined);
      return String((JSON.parse(fs.readFileSync(file, 'utf8')) as { version?: unknown }).version);
    } catch {
      return 'unknown';
    }
  };
  return {
    '@temporalio/worker': version('@temporalio/worker'),
    '@temporalio/workflow': version('@temporalio/workflow'),
    webpack: version('webpack', workerDir),
    'swc-loader': version('swc-loader', workerDir),
    '@swc/core': version('@swc/core', workerDir),
    'source-map-loader': version('source-map-loader', workerDir),
  };
}
