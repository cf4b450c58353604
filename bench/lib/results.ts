import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isQuick } from './args';

/** This package's root (bench/lib/../..). */
export const PACKAGE_ROOT = path.resolve(__dirname, '..', '..');
/** Where results go unless a caller or BENCH_RESULTS_DIR says otherwise. */
export const DEFAULT_RESULTS_DIR = path.join(PACKAGE_ROOT, 'bench', 'results');

/** The dependencies whose versions each results file records, when installed. */
export const KEY_PACKAGES = [
  'kafkajs',
  '@temporalio/worker',
  '@temporalio/client',
  'cassandra-driver',
  'lz4-napi',
  'prom-client',
  'typescript',
  'tsx',
] as const;

export interface Machine {
  cpus: { model: string; count: number };
  memoryBytes: number;
  os: string;
  node: string;
}

export interface BenchResults {
  figures: Record<string, number>;
  machine: Machine;
  versions: Record<string, string>;
  at: string;
  quick: boolean;
  /** The checkout's commit the run measured, with "+ uncommitted changes" when the tree differed (bench/results aside). */
  product_commit?: string;
  notes?: Record<string, unknown>;
}

/** The checkout's short commit, and whether tracked files differ from it; undefined outside git. */
export function productCommit(root: string = PACKAGE_ROOT): string | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    // Results files are what benchmarks write, not product: one run after another must not count them.
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return `${head}${dirty ? ' + uncommitted changes' : ''}`;
  } catch {
    return undefined;
  }
}

export interface WriteResultsExtra {
  /** More versions to record, e.g. `{ kafka: '3.9.0', cassandra: '5.0.2' }`; they win over found ones. */
  versions?: Record<string, string>;
  /** Anything else worth keeping with the figures (workload sizes, settings). */
  notes?: Record<string, unknown>;
  /** Where to write; default BENCH_RESULTS_DIR or bench/results. */
  outDir?: string;
  /** The commit measured, taken when the run started (default: the checkout's at writing). */
  productCommit?: string;
}

export function machineInfo(): Machine {
  const cpus = os.cpus();
  return {
    cpus: { model: cpus[0]?.model.trim() ?? 'unknown', count: cpus.length },
    memoryBytes: os.totalmem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
  };
}

/** This package's version and the installed versions of KEY_PACKAGES, read from node_modules. */
export function packageVersions(root: string = PACKAGE_ROOT): Record<string, string> {
  const versions: Record<string, string> = {};
  const own = readVersion(path.join(root, 'package.json'));
  if (own) versions['kafka-flow-temporal'] = own;
  for (const name of KEY_PACKAGES) {
    const version = readVersion(path.join(root, 'node_modules', name, 'package.json'));
    if (version) versions[name] = version;
  }
  return versions;
}

function readVersion(file: string): string | undefined {
  try {
    const version = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
    return typeof version === 'string' ? version : undefined;
  } catch {
    return undefined;
  }
}

export function resultsDir(outDir?: string): string {
  return outDir ?? process.env.BENCH_RESULTS_DIR ?? DEFAULT_RESULTS_DIR;
}

/**
 * Writes `<dir>/<name>.json` as `{ figures, machine, versions, at, quick, notes? }` (pretty JSON)
 * and returns its path. Figures must be finite numbers: JSON has no NaN or Infinity.
 */
export function writeResults(name: string, figures: Record<string, number>, extra: WriteResultsExtra = {}): string {
  if (!/^[a-z0-9][a-z0-9_-]*$/i.test(name)) {
    throw new Error(`benchmark name "${name}" must be letters, digits, - and _ (it names the results file)`);
  }
  for (const [key, value] of Object.entries(figures)) {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new Error(`figure "${key}" of benchmark "${name}" is ${String(value)}: figures must be finite numbers`);
    }
  }
  const results: BenchResults = {
    figures,
    machine: machineInfo(),
    versions: { ...packageVersions(), ...extra.versions },
    at: new Date().toISOString(),
    quick: isQuick(),
    product_commit: extra.productCommit ?? productCommit(),
    ...(extra.notes ? { notes: extra.notes } : {}),
  };
  const dir = resultsDir(extra.outDir);
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  return file;
}

/** Every `<name>.json` in the results directory that has a `figures` object, by name. */
export function readAllResults(outDir?: string): Map<string, BenchResults> {
  const dir = resultsDir(outDir);
  const all = new Map<string, BenchResults>();
  if (!existsSync(dir)) return all;
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    try {
      const parsed = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as BenchResults;
      if (parsed && typeof parsed.figures === 'object' && parsed.figures !== null) {
        all.set(file.slice(0, -'.json'.length), parsed);
      }
    } catch {
      // not a results file of ours: skipped
    }
  }
  return all;
}

/**
 * The benchmarks to run: each `bench:<name>` script in package.json whose `bench/<name>.ts` exists,
 * in the order package.json lists them.
 */
export function discoverBenchmarks(root: string = PACKAGE_ROOT): string[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  return Object.keys(pkg.scripts ?? {})
    .filter((script) => script.startsWith('bench:'))
    .map((script) => script.slice('bench:'.length))
    .filter((name) => name !== '' && existsSync(path.join(root, 'bench', `${name}.ts`)));
}
