/**
 * Command-line switches every benchmark understands. `--quick` (or BENCH_QUICK=1) runs a smaller
 * workload: enough to prove the benchmark works, too little for figures worth quoting.
 */
export function isQuick(argv: readonly string[] = process.argv, env: NodeJS.ProcessEnv = process.env): boolean {
  if (argv.includes('--quick')) return true;
  const flag = env.BENCH_QUICK?.trim().toLowerCase();
  return flag === '1' || flag === 'true' || flag === 'yes';
}

/** `full` normally, `quick` under --quick: `const keys = sized(100_000, 2_000)`. */
export function sized<T>(full: T, quick: T, argv?: readonly string[], env?: NodeJS.ProcessEnv): T {
  return isQuick(argv, env) ? quick : full;
}

/** The arguments that are not switches (`--…`), e.g. benchmark names given to run-all. */
export function positionalArgs(argv: readonly string[] = process.argv): string[] {
  return argv.slice(2).filter((a) => !a.startsWith('--'));
}
