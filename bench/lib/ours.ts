// This project as a contestant of bench:throughput: one worker process
// (`kafka-flow-temporal worker bench/flows/totals.ts`) folding the topic into running totals, timed
// like every contestant from spawning the process until the flow's group's committed offsets reach
// the input's end offsets (with the Kafka backend: until the last transaction carrying snapshots
// and offsets has committed). Then SIGTERM (flush, leave the group) and cleanup: the group, the
// snapshot topic, the partition workflows.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { brokersFromEnv } from '../../config/env';
import { partitionWorkflowId } from '../../workflows/partition-workflow';
import { connectTemporal } from '../../workers/connect/temporal-connection';
import { stopChild } from './anchors';
import { type CommitSample, commitLags, percentile, type PositionLog } from './commit-lag';
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import { cpuUsPerRecord, machineBusyMs, processCpuMs, processMemoryMb, threadCpuDelta, threadCpuMs } from './cpu';
import type { ContestantResult } from './raw';
import { deleteGroups, deleteTopics, topicsWithPrefix, uniqueName } from './records';
import { PACKAGE_ROOT } from './results';

export interface OursOptions {
  brokers?: string[];
  /** The flow's persistence: 'kafka' (transactional, the benchmark's subject) or 'memory'. Default BENCH_BACKEND or 'kafka'. */
  backend?: 'kafka' | 'memory';
  timeoutMs?: number;
  /** Write a V8 CPU profile of the worker here (`node --cpu-prof`); default BENCH_CPU_PROF. */
  cpuProfDir?: string;
  /** Append every line the worker prints to this file, each prefixed with ms since spawn; default BENCH_WORKER_LOG. */
  logFile?: string;
  /** Another flow module (default bench/flows/totals.ts); it must print the same markers when BENCH_RECORDS is set. */
  flowModule?: string;
  /** More environment for the worker, given the run's flow name (also its group) and input topic. */
  env?: (flow: string, topic: string) => NodeJS.ProcessEnv;
  /** Label of the progress bar; default `ours (<backend>)`. */
  label?: string;
  /**
   * Runs once the committed offsets reached the end, before the worker is stopped and the run's
   * topics are deleted (e.g. to read back what the flow emitted); its result joins the details.
   */
  check?: (flow: string, topic: string) => Promise<Record<string, unknown>>;
}

const sinceMs = (at: bigint | undefined, start: bigint) => (at === undefined ? undefined : Math.round(Number(at - start) / 1e6));

export const FLOW_MODULE = path.join(PACKAGE_ROOT, 'bench', 'flows', 'totals.ts');

export async function runOurs(topic: string, options: OursOptions = {}): Promise<ContestantResult> {
  const brokers = options.brokers ?? brokersFromEnv();
  const backend = options.backend ?? (process.env.BENCH_BACKEND === 'memory' ? 'memory' : 'kafka');
  const end = await readEndOffsets(topic, brokers);
  const records = totalOf(end);
  const flow = uniqueName('bench-ours');
  const snapshotTopic = `${flow}-snapshots`;
  let child: ChildProcess | undefined;
  let exited: Error | undefined;
  const logTail: string[] = [];
  const cpuProfDir = options.cpuProfDir ?? process.env.BENCH_CPU_PROF;
  const logFile = options.logFile ?? process.env.BENCH_WORKER_LOG;
  // Phases of the worker's start, as it reports them: its log (info level: a few lines per
  // partition, none per record or persist) and the bench flow's markers on stdout.
  const at: { started?: bigint; firstFold?: bigint; allFolded?: bigint; recovered: bigint[] } = { recovered: [] };
  const cpu: { firstFold?: number; allFolded?: number; reached?: number } = {};
  // Where the steady window's CPU went: per thread name of the worker, and the whole machine's.
  const threads: { firstFold?: Record<string, number>; reached?: Record<string, number> } = {};
  const machine: { firstFold?: number; reached?: number } = {};
  // The folded position (the bench flow's BENCH POS lines) and the committed offsets, for the commit lag.
  const positions = new Map<number, Array<readonly [number, number]>>();
  const samples: CommitSample[] = [];
  const wall: { firstFold?: number; allFolded?: number } = {};

  const start = process.hrtime.bigint();
  try {
    // BENCH_WORKER_NODE_ARGS: more node options for the worker (experiments, e.g. V8 heap flags).
    const extraArgs = process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    const nodeArgs = [...extraArgs, ...(cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : [])];
    child = spawn(process.execPath, [...nodeArgs, path.join(PACKAGE_ROOT, 'bin', 'kafka-flow-temporal.js'), 'worker', options.flowModule ?? FLOW_MODULE], {
      cwd: PACKAGE_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        KAFKA_BROKERS: brokers.join(','),
        BENCH_TOPIC: topic,
        BENCH_GROUP: flow,
        BENCH_FLOW: flow,
        BENCH_BACKEND: backend,
        BENCH_SNAPSHOT_TOPIC: snapshotTopic,
        BENCH_RECORDS: String(records),
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
        ...options.env?.(flow, topic),
      },
    });
    const proc = child;
    proc.once('error', (err) => {
      exited = err;
    });
    proc.once('exit', (code, signal) => {
      exited = new Error(`the worker exited early (${signal ?? `exit ${code}`}):\n${logTail.join('\n')}`);
    });
    const keep = (line: string) => {
      const now = process.hrtime.bigint();
      if (line.startsWith('BENCH POS ')) {
        const [atMs, partition, pos] = line.slice('BENCH POS '.length).split(' ').map(Number) as [number, number, number];
        const log = positions.get(partition) ?? [];
        log.push([atMs, pos]);
        positions.set(partition, log);
        return;
      }
      if (line === 'BENCH FIRST_FOLD' && at.firstFold === undefined) {
        at.firstFold = now;
        wall.firstFold = Date.now();
        cpu.firstFold = processCpuMs(proc.pid);
        threads.firstFold = threadCpuMs(proc.pid);
        machine.firstFold = machineBusyMs();
      } else if (line === 'BENCH ALL_FOLDED' && at.allFolded === undefined) {
        at.allFolded = now;
        wall.allFolded = Date.now();
        cpu.allFolded = processCpuMs(proc.pid);
      }
      else if (line.includes('"msg":"worker started"')) at.started ??= now;
      else if (line.includes('"msg":"recovered"')) at.recovered.push(now);
      logTail.push(line);
      if (logTail.length > 30) logTail.shift();
      if (logFile) appendFileSync(logFile, `${sinceMs(now, start)} ${line}\n`);
      if (/"level":(50|60)/.test(line)) process.stderr.write(`[worker] ${line}\n`);
    };
    createInterface({ input: proc.stdout! }).on('line', keep);
    createInterface({ input: proc.stderr! }).on('line', keep);
    const { reachedAt, firstCommitAt, firstCommitted } = await waitForCommittedEnd({
      groupId: flow,
      topic,
      end,
      brokers,
      timeoutMs: options.timeoutMs ?? 600_000,
      label: `${options.label ?? `ours (${backend})`} ${topic}`,
      failure: () => exited,
      onSample: (atMs, committed) => samples.push({ atMs, committed }),
    });
    cpu.reached = processCpuMs(proc.pid);
    threads.reached = threadCpuMs(proc.pid);
    machine.reached = machineBusyMs();
    const memory = processMemoryMb(proc.pid);
    const checked = options.check ? await options.check(flow, topic) : undefined;
    const lastRecovered = at.recovered.length > 0 ? at.recovered[at.recovered.length - 1] : undefined;
    // Under full load: from the first record folded to the last.
    const lags = wall.firstFold !== undefined && wall.allFolded !== undefined ? commitLags(positions as PositionLog, samples, end, wall.firstFold, wall.allFolded) : [];
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      steady: at.firstFold === undefined ? undefined : {
              ms: Number(reachedAt - at.firstFold) / 1e6,
              records,
              from: 'first record folded',
              cpuMs: cpu.firstFold === undefined || cpu.reached === undefined ? undefined : cpu.reached - cpu.firstFold,
            },
      details: {
        backend,
        flow,
        worker_started_after_ms: sinceMs(at.started, start),
        partitions_recovered: at.recovered.length,
        last_recovered_after_ms: sinceMs(lastRecovered, start),
        first_fold_after_ms: sinceMs(at.firstFold, start),
        all_folded_after_ms: sinceMs(at.allFolded, start),
        first_commit_after_ms: sinceMs(firstCommitAt, start),
        first_committed: firstCommitted,
        // Folding alone (first record folded → last record folded), and what the committed finishing line adds after it.
        fold_only_records_per_s:
          at.firstFold !== undefined && at.allFolded !== undefined && at.allFolded > at.firstFold
            ? Math.round((records * 1e9) / Number(at.allFolded - at.firstFold))
            : undefined,
        commit_tail_ms: at.allFolded === undefined ? undefined : Math.round(Number(reachedAt - at.allFolded) / 1e6),
        commit_lag_p50_ms: percentile(lags, 50),
        commit_lag_p99_ms: percentile(lags, 99),
        commit_lag_max_ms: percentile(lags, 100),
        commit_lag_samples: lags.length,
        fold_only_cpu_us_per_record: cpuUsPerRecord(cpu.firstFold, cpu.allFolded, records),
        rss_mb: memory?.rss,
        rss_peak_mb: memory?.peak,
        steady_cpu_ms_by_thread: threadCpuDelta(threads.firstFold, threads.reached),
        // Every process's CPU in the steady window (the worker's, the broker's, the driver's, neighbours').
        steady_machine_busy_ms: machine.firstFold === undefined || machine.reached === undefined ? undefined : Math.round(machine.reached - machine.firstFold),
        ...checked,
      },
    };
  } finally {
    if (child) {
      const code = await stopChild(child, 60_000);
      if (code !== 0 && code !== null) process.stderr.write(`warning: the worker exited with code ${code}\n${logTail.slice(-10).join('\n')}\n`);
    }
    // The snapshot topic, and whatever else the backend named after this run's unique flow (dead letters).
    await deleteTopics([...new Set([snapshotTopic, ...(await topicsWithPrefix(`${flow}-`, brokers).catch(() => []))])], brokers);
    await deleteGroups([flow], brokers);
    await terminateWorkflows(flow, topic, [...end.keys()]);
  }
}

/** The partition workflows wait for a next assignment forever: end them, they were one run's. */
async function terminateWorkflows(flow: string, topic: string, partitions: number[]): Promise<void> {
  let temporal: Awaited<ReturnType<typeof connectTemporal>> | undefined;
  try {
    temporal = await connectTemporal();
    const client = temporal.client;
    await Promise.all(
      partitions.map((partition) =>
        client.workflow
          .getHandle(partitionWorkflowId({ flow, topic, partition }))
          .terminate('benchmark run over')
          .catch(() => undefined),
      ),
    );
  } catch (err) {
    process.stderr.write(`warning: could not terminate the partition workflows of ${flow}: ${(err as Error).message}\n`);
  } finally {
    await temporal?.close().catch(() => undefined);
  }
}
