// The run's report: figures (bench/results/chaos.json), tables, the stall's evidence, wrong keys.
import fs from 'node:fs';
import path from 'node:path';
import { writeResults } from '../bench/lib/results';
import { printTable, type Row } from '../bench/lib/table';
import { type FaultRecord, formatFault } from './fault-log';
import { type Mode, ownerOf } from './modes';
import { describeWrongKey, type InputLog, type OutputVerdict, type Verdict } from './oracle';
import type { Outages } from './outages';
import type { Sampler } from './sampler';
import { FAULT_TYPES } from './faults';
import { countByType } from './schedule';
import type { PrivateServers } from './servers';
import {
  CASSANDRA_FENCING,
  CASSANDRA_LAYOUT,
  KEYS,
  MAX_PENDING_OUTPUTS,
  MAX_WRITES,
  MODE_IDS,
  PARALLEL,
  PARTITIONS,
  PERSIST_EVERY_MS,
  WORKFLOW_REPORT_EVERY_MS,
  PHASE_MS,
  PRODUCT_COMMIT,
  QUICK,
  RATE,
  SEED,
  SERVER_REST_MS,
  SESSION_TIMEOUT_MS,
  say,
  t0,
  WRITE_BENCH,
} from './settings';

export interface ModeVerdict {
  mode: Mode;
  verdict: Verdict;
  /** The output topic against the outputs the reference fold emits. */
  outputs: OutputVerdict;
  /** The dead-letter topic against the poison records of the input. */
  deadLetters: OutputVerdict;
  records: number;
  /** The input, compactly (the wrong keys' partitions and last records). */
  log: InputLog;
  inspectError?: string;
  outputsError?: string;
}

/** Everything a run observed, for the report. */
export interface RunOutcome {
  outages: Outages;
  dir: string;
  logDir: string;
  servers: PrivateServers;
  modes: Mode[];
  samplers: Sampler[];
  faultLog: FaultRecord[];
  events: string[];
  startupProblems: string[];
  stuck: string[];
  unrecovered: FaultRecord[];
  caughtUp: Array<number | undefined>;
  offsetsAtEnd: boolean[];
  exits: Array<{ name: string; code: number | null; killed: boolean }>;
  timeline: string[];
  verdicts: ModeVerdict[];
  driverErrors: number;
  /** Files of the code the workers load that changed during the run (CheckoutWatch): any voids it. */
  checkoutChanges: readonly string[];
}

/** The `q` quantile of busy shares (0–1) as a whole percentage; 0 when there are none. */
function percentOf(shares: number[], q: number): number {
  if (shares.length === 0) return 0;
  const sorted = [...shares].sort((a, b) => a - b);
  return Math.round(100 * sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
}

/** Prints the report and writes the results; the exit code: 1 when the oracle failed. */
export function report(o: RunOutcome): number {
  const { outages, dir, logDir, servers, modes, samplers, faultLog, events, startupProblems, stuck, unrecovered, caughtUp, offsetsAtEnd, exits, timeline, verdicts, driverErrors, checkoutChanges } = o;
  const applied = faultLog.filter((f) => !f.skipped && !f.error);
  const byType = countByType(applied);
  const recoveries = applied
    .flatMap((f) => (f.recoveryS !== undefined ? [f.recoveryS] : f.recoveryCensoredS !== undefined ? [f.recoveryCensoredS] : []))
    .sort((a, b) => a - b);
  const recoveriesWall = applied
    .flatMap((f) => (f.recoveryWallS !== undefined ? [f.recoveryWallS] : f.recoveryCensoredWallS !== undefined ? [f.recoveryCensoredWallS] : []))
    .sort((a, b) => a - b);
  const maxStall = samplers.map((x) => x.maxStall).reduce((a, x) => (x.ms > a.ms ? x : a), samplers[0]!.maxStall);
  const maxStallWithOutages = samplers.map((x) => x.maxStallWithOutages).reduce((a, x) => (x.ms > a.ms ? x : a), samplers[0]!.maxStallWithOutages);
  const outageS = Number((outages.downMs(['kafka', 'temporal', 'cassandra'], 0, Date.now()) / 1000).toFixed(1));
  const ownerGoneS = Number((outages.downMs(modes.map((m) => ownerOf(m.spec)), 0, Date.now()) / 1000).toFixed(1));
  const allCaughtUp = caughtUp.every((c) => c !== undefined);
  const allAtEnd = offsetsAtEnd.every(Boolean);
  const p99Of = (sorted: number[]) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]! : 0);
  const p99 = p99Of(recoveries);
  const p99Wall = p99Of(recoveriesWall);
  const wrong = verdicts.reduce((a, v) => a + v.verdict.wrongKeys.length, 0);
  const lost = verdicts.reduce((a, v) => a + v.verdict.lostRecords, 0);
  const duplicated = verdicts.reduce((a, v) => a + v.verdict.duplicatedRecords, 0);
  const outputsExpected = verdicts.reduce((a, v) => a + v.outputs.expected, 0);
  const wrongOutputs = verdicts.reduce((a, v) => a + v.outputs.wrong, 0);
  const lostOutputs = verdicts.reduce((a, v) => a + v.outputs.lost, 0);
  const duplicatedOutputs = verdicts.reduce((a, v) => a + v.outputs.duplicated, 0);
  const redeliveredOutputs = verdicts.reduce((a, v) => a + v.outputs.redelivered, 0);
  const deadLettersExpected = verdicts.reduce((a, v) => a + v.deadLetters.expected, 0);
  const wrongDeadLetters = verdicts.reduce((a, v) => a + v.deadLetters.wrong, 0);
  const lostDeadLetters = verdicts.reduce((a, v) => a + v.deadLetters.lost, 0);
  const duplicatedDeadLetters = verdicts.reduce((a, v) => a + v.deadLetters.duplicated, 0);
  const maxStallS = Number((maxStall.ms / 1000).toFixed(1));
  // Issue 28's goals: a stall shorter than the session timeout + 15 s, a fault's recovery within 30 s (p99).
  const stallGoalS = SESSION_TIMEOUT_MS / 1000 + 15;
  const recoveryGoalS = 30;
  const ambiguous = applied.reduce((a, f) => a + (f.commitsCut ?? 0), 0);
  const crashes = modes.reduce((a, m) => a + m.pool.crashes, 0);
  const figures: Record<string, number> = {
    chaos_faults: applied.length,
    ...Object.fromEntries(FAULT_TYPES.map((t) => [`chaos_faults_${t.replaceAll('-', '_')}`, byType[t]])),
    chaos_ambiguous_commits: ambiguous,
    chaos_wrong_keys: wrong,
    chaos_lost_records: lost,
    chaos_duplicated_records: duplicated,
    chaos_outputs: outputsExpected,
    chaos_wrong_outputs: wrongOutputs,
    chaos_lost_outputs: lostOutputs,
    chaos_duplicated_outputs: duplicatedOutputs,
    chaos_outputs_redelivered: redeliveredOutputs,
    chaos_dead_letters: deadLettersExpected,
    chaos_wrong_dead_letters: wrongDeadLetters,
    chaos_lost_dead_letters: lostDeadLetters,
    chaos_duplicated_dead_letters: duplicatedDeadLetters,
    chaos_max_stall_s: maxStallS,
    ...Object.fromEntries(
      samplers.flatMap((x) => [...x.maxStallByMode].map(([mode, stall]) => [`chaos_max_stall_s_${mode.replaceAll('-', '_')}`, Number((stall.ms / 1000).toFixed(1))])),
    ),
    chaos_max_stall_with_outages_s: Number((maxStallWithOutages.ms / 1000).toFixed(1)),
    chaos_server_outage_s: outageS,
    chaos_owner_gone_s: ownerGoneS,
    chaos_recovery_p99_s: p99,
    chaos_recovery_with_outages_p99_s: p99Wall,
    // The machine's busy share over the samples (all cores; cpu.log in the run directory).
    chaos_cpu_busy_median_pct: percentOf(samplers.flatMap((x) => x.cpu?.busyShares ?? []), 0.5),
    chaos_cpu_busy_p10_pct: percentOf(samplers.flatMap((x) => x.cpu?.busyShares ?? []), 0.1),
    chaos_unrecovered_faults: unrecovered.length,
    chaos_records: verdicts.reduce((a, v) => a + v.records, 0),
    chaos_worker_crashes: crashes,
    chaos_workers_started: modes.reduce((a, m) => a + m.pool.all.length, 0),
    chaos_session_timeout_s: SESSION_TIMEOUT_MS / 1000,
    chaos_driver_errors: driverErrors,
    chaos_checkout_changes: checkoutChanges.length,
    chaos_startup_stuck_partitions: startupProblems.length,
    chaos_caught_up: allCaughtUp ? 1 : 0,
    chaos_offsets_at_end: allAtEnd ? 1 : 0,
    ...Object.fromEntries(verdicts.map((v) => [`chaos_wrong_keys_${v.mode.spec.id.replaceAll('-', '_')}`, v.verdict.wrongKeys.length])),
  };

  process.stdout.write('\nfault log:\n');
  for (const f of faultLog) process.stdout.write(`  ${formatFault(f)}\n`);
  if (events.length) process.stdout.write(`events:\n  ${events.join('\n  ')}\n`);
  if (startupProblems.length) process.stdout.write(`partitions not running at startup (before any fault):\n  ${startupProblems.join('\n  ')}\n`);
  if (stuck.length) process.stdout.write(`partitions not caught up at the end:\n  ${stuck.join('\n  ')}\n`);
  process.stdout.write('\n');
  printTable(
    'faults by type',
    FAULT_TYPES.filter((t) => byType[t] > 0).map((t) => {
      const r = applied.filter((f) => f.type === t && f.recoveryS !== undefined).map((f) => f.recoveryS!);
      return { type: t, count: byType[t], recovered: r.length, 'recovery median s': r.length ? r.sort((a, b) => a - b)[Math.floor(r.length / 2)]! : '-', 'recovery max s': r.length ? Math.max(...r) : '-' };
    }),
  );
  printTable(
    'modes',
    verdicts.map((v): Row => ({
      mode: v.mode.spec.id,
      records: v.records,
      acked: v.mode.producer.acked,
      keys: v.verdict.keysExpected,
      'keys persisted': v.verdict.keysActual,
      'wrong keys': v.verdict.wrongKeys.length,
      lost: v.verdict.lostRecords,
      duplicated: v.verdict.duplicatedRecords,
      outputs: v.outputs.expected,
      'outputs read': v.outputs.read,
      'wrong/lost/dup outputs': `${v.outputs.wrong}/${v.outputs.lost}/${v.outputs.duplicated}`,
      redelivered: v.outputs.delivery === 'at-least-once' ? v.outputs.redelivered : '-',
      'dead letters': v.deadLetters.expected,
      'wrong/lost/dup dead letters': `${v.deadLetters.wrong}/${v.deadLetters.lost}/${v.deadLetters.duplicated}`,
      workers: v.mode.pool.all.length,
      crashes: v.mode.pool.crashes,
      inspect: v.inspectError ? 'FAILED' : 'ok',
    })),
  );
  const goals: Row[] = [
    { figure: 'chaos_faults', value: applied.length, goal: `>= ${QUICK ? 30 : 200}`, ok: applied.length >= (QUICK ? 30 : 200) ? 'yes' : 'NO' },
    { figure: 'chaos_ambiguous_commits (settled: the oracle)', value: ambiguous, goal: QUICK ? '-' : '>= 10', ok: QUICK ? '-' : ambiguous >= 10 ? 'yes' : 'NO' },
    { figure: 'chaos_wrong_keys', value: wrong, goal: '0', ok: wrong === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_lost_records', value: lost, goal: '0', ok: lost === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_duplicated_records', value: duplicated, goal: '0', ok: duplicated === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_wrong_outputs', value: wrongOutputs, goal: '0', ok: wrongOutputs === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_lost_outputs', value: lostOutputs, goal: '0', ok: lostOutputs === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_duplicated_outputs (after dedupe where at least once)', value: duplicatedOutputs, goal: '0', ok: duplicatedOutputs === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_wrong_dead_letters', value: wrongDeadLetters, goal: '0', ok: wrongDeadLetters === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_lost_dead_letters', value: lostDeadLetters, goal: '0', ok: lostDeadLetters === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_duplicated_dead_letters (after dedupe where at least once)', value: duplicatedDeadLetters, goal: '0', ok: duplicatedDeadLetters === 0 ? 'yes' : 'NO' },
    { figure: 'chaos_max_stall_s', value: maxStallS, goal: `< ${stallGoalS}`, ok: maxStallS < stallGoalS ? 'yes' : 'NO' },
    ...Object.entries(figures)
      .filter(([name]) => name.startsWith('chaos_max_stall_s_'))
      .map(([figure, value]) => ({ figure, value, goal: `< ${stallGoalS}`, ok: value < stallGoalS ? 'yes' : 'NO' })),
    { figure: 'chaos_max_stall_with_outages_s', value: figures.chaos_max_stall_with_outages_s!, goal: '-', ok: '-' },
    { figure: 'chaos_server_outage_s', value: outageS, goal: '-', ok: '-' },
    { figure: 'chaos_owner_gone_s', value: ownerGoneS, goal: '-', ok: '-' },
    { figure: 'chaos_recovery_p99_s', value: p99, goal: `<= ${recoveryGoalS}`, ok: p99 <= recoveryGoalS ? 'yes' : 'NO' },
    { figure: 'chaos_recovery_with_outages_p99_s', value: p99Wall, goal: '-', ok: '-' },
    { figure: 'caught up (committed = log end)', value: caughtUp.map((c) => (c === undefined ? 'no' : `${c.toFixed(1)} s`)).join(', '), goal: 'yes', ok: allCaughtUp ? 'yes' : 'NO' },
    { figure: 'offsets at end after the stop', value: offsetsAtEnd.map((o) => (o ? 'yes' : 'no')).join(', '), goal: 'yes', ok: allAtEnd ? 'yes' : 'NO' },
  ];
  printTable(`chaos (seed ${SEED}${QUICK ? ', quick' : ''}): max stall ${maxStallS} s on ${maxStall.key} from ${maxStall.fromS} s to ${maxStall.toS} s (${(maxStall.outageMs / 1000).toFixed(1)} s of it with a server out or an owner's session not yet expired, left out)`, goals);
  if (maxStallS >= stallGoalS) {
    const [modeId, part] = maxStall.key.split('/');
    const seen = timeline.filter((l) => {
      const t = Number(l.split(' ')[0]);
      return l.includes(` ${modeId} p${part} `) && t >= maxStall.fromS - 5 && t <= maxStall.toS + 5;
    });
    const phases = seen.map((l) => l.replace(/^(\S+) s \S+ p\d+ /, '$1 s ')).filter((l, i, all) => i === 0 || l.split(' ').slice(2).join(' ') !== all[i - 1]!.split(' ').slice(2).join(' '));
    process.stdout.write(`stall evidence: ${maxStall.key} made no progress from ${maxStall.fromS} s to ${maxStall.toS} s; its workflow status meanwhile (changes only, full timeline in ${path.join(dir, 'status.log')}):\n  ${phases.slice(0, 30).join('\n  ')}\n`);
    const during = faultLog.filter((f) => f.startedS !== undefined && f.startedS <= maxStall.toS && (f.healedS ?? Number.POSITIVE_INFINITY) >= maxStall.fromS - 10);
    process.stdout.write(`faults around it:\n  ${during.map(formatFault).join('\n  ')}\n`);
  }
  if (unrecovered.length) process.stdout.write(`faults without a measured recovery: ${unrecovered.map((f) => `#${f.index} ${f.type}`).join(', ')}\n`);

  const notes = {
    seed: SEED,
    parallel: PARALLEL,
    product_commit: PRODUCT_COMMIT,
    checkout_changes: checkoutChanges,
    modes: MODE_IDS,
    partitions: PARTITIONS,
    keys: KEYS,
    rate_records_per_s_per_mode: RATE,
    max_writes_per_persist_chunk: MAX_WRITES,
    max_pending_outputs: MAX_PENDING_OUTPUTS,
    cassandra_fencing: CASSANDRA_FENCING ?? 'default (lwt)',
    cassandra_layout: CASSANDRA_LAYOUT ?? 'default (kafka-flow)',
    fault_phase_s: PHASE_MS / 1000,
    session_timeout_ms: SESSION_TIMEOUT_MS,
    server_rest_ms: SERVER_REST_MS,
    persist_every_ms: PERSIST_EVERY_MS,
    workflow_report_every_ms: WORKFLOW_REPORT_EVERY_MS ?? null,
    stall: 'longest time a partition had committed < log end without its committed offset moving (sampled every second from the group offsets, owner or not), leaving out the time outside the system: a server its mode needs (Kafka, Temporal, and Cassandra for the cassandra mode) out (killed or stopped until ready again, or cut off by a dropping or stalling proxy), and the session timeout after a worker of the mode was killed or frozen (the group cannot know before); chaos_max_stall_with_outages_s counts that time too',
    outages: outages.list(t0),
    recovery:
      'from a fault healed until every partition of the affected mode(s) committed past its offset at the heal (or was at the log end), leaving out the time meanwhile when a server those modes need was out or an owner of theirs killed or frozen had not yet reached its session timeout (the outages the stall figure leaves out: with faults every few seconds, those of the faults after it); chaos_recovery_with_outages_p99_s counts that time too. Per-second committed offsets and log ends: offsets.log in the run directory',
    lost_duplicated: 'per key, count (records folded since the key was last created) short of / beyond the reference',
    outputs:
      'the fold emits on a deletion and when a record or a pulse timer\'s fire leaves the key hash divisible by 4 (chaos/flow.ts chaosOutput, chaosFireOutput; event timers and stateTtl fired by the reference as the engine must); the output topic read read_committed after the run against the outputs of the reference fold: transactional modes (kafka, kafka-local) each exactly once; cassandra at least once, every copy of a kafka-flow-source the same value, so exactly once after deduplication by it (chaos_duplicated_outputs counts copies beyond the first in the transactional modes, chaos_outputs_redelivered those the deduplication removed in the at-least-once mode); wrong = no or unknown source, or another value',
    fault_log: faultLog,
    events,
    stuck,
    startup: startupProblems,
    worker_exits: exits,
    dir,
  };
  fs.writeFileSync(path.join(dir, 'faults.json'), `${JSON.stringify(faultLog, null, 2)}\n`);
  const file = writeResults('chaos', figures, { versions: { kafka: '4.3.1', temporalCli: '1.9.1', cassandra: '5.0.6' }, notes, outDir: WRITE_BENCH ? undefined : dir, productCommit: PRODUCT_COMMIT });
  say(`results: ${file}`);

  const failed =
    wrong > 0 || wrongOutputs > 0 || lostOutputs > 0 || duplicatedOutputs > 0 || wrongDeadLetters > 0 || lostDeadLetters > 0 || duplicatedDeadLetters > 0 || !allCaughtUp || !allAtEnd || checkoutChanges.length > 0;
  if (checkoutChanges.length > 0) {
    process.stdout.write(
      `\nTHE CHECKOUT CHANGED DURING THE RUN (${checkoutChanges.slice(0, 10).join(', ')}${checkoutChanges.length > 10 ? ', …' : ''}): workers started after the change ran other code, so the run does not measure one version. Run it again without touching the checkout.\n`,
    );
  }
  if (wrong > 0) {
    process.stdout.write('\nWRONG KEYS (expected = reference fold of the input topic, actual = inspect):\n');
    for (const v of verdicts) {
      const shown = v.verdict.wrongKeys.slice(0, 25);
      const histories = v.log.histories(shown.map((w) => w.key));
      for (const w of shown) {
        process.stdout.write(`  [${v.mode.spec.id} p${v.log.partitionOf(w.key) ?? '?'}] ${describeWrongKey(w)}; last records ${(histories.get(w.key) ?? []).join(' ')}\n`);
      }
      if (v.verdict.wrongKeys.length > 25) process.stdout.write(`  [${v.mode.spec.id}] … ${v.verdict.wrongKeys.length - 25} more\n`);
    }
  }
  if (wrongOutputs + lostOutputs + duplicatedOutputs > 0) {
    process.stdout.write('\nWRONG, LOST OR DUPLICATED OUTPUTS (expected = the outputs of the reference fold, actual = the output topic):\n');
    for (const v of verdicts) for (const e of v.outputs.examples) process.stdout.write(`  [${v.mode.spec.id}] ${e}\n`);
  }
  if (wrongDeadLetters + lostDeadLetters + duplicatedDeadLetters > 0) {
    process.stdout.write('\nWRONG, LOST OR DUPLICATED DEAD LETTERS (expected = the poison records of the input, by partition/offset):\n');
    for (const v of verdicts) for (const e of v.deadLetters.examples) process.stdout.write(`  [${v.mode.spec.id}] ${e}\n`);
  }
  if (failed) {
    // The reasons again, last: a caller that keeps only the tail of the output (the quick run's
    // test) still sees why, after the lists of wrong keys above.
    const why = [
      ...verdicts.map(
        (v) =>
          `${v.mode.spec.id}: ${v.verdict.wrongKeys.length} wrong of ${v.verdict.keysExpected} keys (${v.verdict.keysActual} read), lost ${v.verdict.lostRecords}, duplicated ${v.verdict.duplicatedRecords}, outputs wrong/lost/dup ${v.outputs.wrong}/${v.outputs.lost}/${v.outputs.duplicated}${v.inspectError ? `, INSPECT FAILED: ${v.inspectError}` : ''}${v.outputsError ? `, reading outputs failed: ${v.outputsError}` : ''}`,
      ),
      // The evidence before the goals (a reader that keeps only the first lines sees the cause):
      // partitions that never ran, partitions not caught up with their last error, workers that
      // exited badly, the last events.
      ...startupProblems.slice(0, 4).map((l) => `not running at startup: ${l}`),
      ...stuck.slice(0, 8).map((l) => `not caught up: ${l}`),
      ...exits.filter((e) => e.code !== 0 || e.killed).slice(0, 4).map((e) => `worker exit: ${e.name} code ${e.code}${e.killed ? ' (killed)' : ''}`),
      ...events.slice(-8).map((e) => `event ${e}`),
      ...goals.filter((g) => g.ok === 'NO').map((g) => `goal missed: ${g.figure} = ${g.value} (goal ${g.goal})`),
    ];
    process.stdout.write(`\nWHY THE ORACLE FAILED:\n  ${why.join('\n  ')}\n`);
  }
  if (failed) process.stdout.write(`\nORACLE FAILED. Seed ${SEED}; worker logs in ${logDir}; fault log ${path.join(dir, 'faults.json')}; server logs ${servers.logFiles().join(', ')}\n`);
  else process.stdout.write(`\noracle passed. Logs kept in ${dir}\n`);
  return failed ? 1 : 0;
}
