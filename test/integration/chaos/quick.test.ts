import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The chaos suite's quick run (issue 13) in every `npm test`: 30 faults of every type over the
// four persistence modes (transactional Kafka, with local state, Cassandra, Cassandra with local state and a bounded cache), on private servers of its own (ports from CHAOS_PORT_BASE, default
// 24000 here so that it never meets a developer's `npm run chaos` on 23000), real workers started
// through the CLI, and the exact oracle at the end. A fixed seed, so that a failure is replayed
// with `npm run chaos -- --quick --seed <seed>`; CHAOS_SEED picks another one.
const root = path.join(__dirname, '../../..');
const seed = process.env.CHAOS_SEED ?? '20261202';
const portBase = process.env.CHAOS_PORT_BASE ?? '24000';

interface ChaosResults {
  figures: Record<string, number>;
}

test(`quick chaos run (seed ${seed}): every key exact, nothing lost or duplicated, offsets at the end, every output and dead letter exactly once (after dedupe where at least once)`, async () => {
  const out: string[] = [];
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/run-ts.js'), 'chaos/run.ts', '--quick', '--seed', seed, '--port-base', portBase], {
      cwd: root,
      env: { ...process.env, CHAOS_SEED: seed },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
    child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
    child.on('error', reject);
    child.on('exit', (c) => resolve(c));
  });
  const log = out.join('');
  // On failure, why first (the report's own summary: wrong keys per mode, a failed inspect, the
  // goals missed, the last events), then the report's end: the fault log, the stall's evidence, the
  // wrong keys, the paths. A reader that keeps only the start of a long message still sees why.
  const why = /\nWHY THE ORACLE FAILED:\n[\s\S]*?(?=\n\n|\nORACLE FAILED|$)/.exec(log)?.[0].trim();
  const tail = `${why ? `\n${why}` : ''}\n--- chaos output (last 12,000 characters) ---\n${log.slice(-12_000)}`;
  const file = /results: (\S+\.json)/.exec(log)?.[1];
  if (code !== 0 || !file || !fs.existsSync(file)) throw new Error(`chaos run exited ${code}${file ? '' : ' without writing results'}${tail}`);
  const { figures } = JSON.parse(fs.readFileSync(file, 'utf8')) as ChaosResults;
  const verdict = {
    faults: figures.chaos_faults! >= 30,
    wrongKeys: figures.chaos_wrong_keys,
    lost: figures.chaos_lost_records,
    duplicated: figures.chaos_duplicated_records,
    caughtUp: figures.chaos_caught_up,
    offsetsAtEnd: figures.chaos_offsets_at_end,
    driverErrors: figures.chaos_driver_errors,
    outputs: figures.chaos_outputs! > 0,
    wrongOutputs: figures.chaos_wrong_outputs,
    lostOutputs: figures.chaos_lost_outputs,
    duplicatedOutputs: figures.chaos_duplicated_outputs,
    deadLetters: figures.chaos_dead_letters! > 0,
    wrongDeadLetters: figures.chaos_wrong_dead_letters,
    lostDeadLetters: figures.chaos_lost_dead_letters,
    duplicatedDeadLetters: figures.chaos_duplicated_dead_letters,
  };
  const expected = {
    faults: true,
    wrongKeys: 0,
    lost: 0,
    duplicated: 0,
    caughtUp: 1,
    offsetsAtEnd: 1,
    driverErrors: 0,
    outputs: true,
    wrongOutputs: 0,
    lostOutputs: 0,
    duplicatedOutputs: 0,
    deadLetters: true,
    wrongDeadLetters: 0,
    lostDeadLetters: 0,
    duplicatedDeadLetters: 0,
  };
  if (JSON.stringify(verdict) !== JSON.stringify(expected)) throw new Error(`chaos figures ${JSON.stringify(verdict)}, expected ${JSON.stringify(expected)}${tail}`);
  expect(verdict).toEqual(expected);
}, 8 * 60_000);
