// Runs every benchmark that package.json has a `bench:<name>` script for, one after another, then
// prints one table of all figures in bench/results. `npm run bench -- --quick [name…]`.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { isQuick, positionalArgs } from './lib/args';
import { discoverBenchmarks, PACKAGE_ROOT, readAllResults } from './lib/results';
import { printTable, type Row } from './lib/table';

function main(): number {
  const quick = isQuick();
  const wanted = positionalArgs();
  const all = discoverBenchmarks();
  const unknown = wanted.filter((name) => !all.includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`no benchmark named ${unknown.join(', ')}; known: ${all.join(', ') || '(none)'}\n`);
    return 2;
  }
  const names = wanted.length > 0 ? all.filter((name) => wanted.includes(name)) : all;
  const outcome: Row[] = [];
  for (const name of names) {
    process.stdout.write(`\n=== bench ${name}${quick ? ' (quick)' : ''} ===\n`);
    const args = [path.join('bin', 'run-ts.js'), path.join('bench', `${name}.ts`), ...(quick ? ['--quick'] : [])];
    const start = Date.now();
    const run = spawnSync(process.execPath, args, { cwd: PACKAGE_ROOT, stdio: 'inherit', env: process.env });
    const seconds = (Date.now() - start) / 1000;
    const status = run.error ? `error: ${run.error.message}` : run.status === 0 ? 'ok' : `failed (${run.status ?? run.signal})`;
    outcome.push({ benchmark: name, status, seconds });
  }

  const rows: Row[] = [];
  for (const [name, results] of readAllResults()) {
    for (const [figure, value] of Object.entries(results.figures)) {
      rows.push({ benchmark: name, figure, value, at: results.at, quick: results.quick ? 'yes' : '' });
    }
  }
  process.stdout.write('\n');
  if (outcome.length > 0) printTable('Benchmarks run', outcome);
  printTable('All figures in bench/results', rows);
  return outcome.some((o) => o.status !== 'ok') ? 1 : 0;
}

process.exitCode = main();
