// Anchors: what users would pick instead of this project, run on the same topic in the same run.
// The Kafka Streams anchor (bench/anchors/kafka-streams/) aggregates the records of
// bench/lib/records.ts into running totals with exactly-once v2 and a 1 s commit interval; it is
// timed like every contestant, from spawning the JVM until its group's committed offsets reach the
// input's end offsets.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { findJava17 } from '../../infra/java';
import { brokersFromEnv } from '../../config/env';
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import { processCpuMs } from './cpu';
import type { ContestantResult } from './raw';
import { deleteGroups, deleteTopics, topicsWithPrefix, uniqueName } from './records';
import { PACKAGE_ROOT } from './results';

export const STREAMS_PROJECT = path.join(PACKAGE_ROOT, 'bench', 'anchors', 'kafka-streams');
export const STREAMS_JAR = path.join(STREAMS_PROJECT, 'target', 'kafka-streams-anchor.jar');
/** The Kafka Streams version the anchor is built with (pom.xml). */
export const STREAMS_VERSION = '4.3.1';

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'target') continue;
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * Builds the anchor's fat jar with Maven (Kafka Streams from Maven Central, Maven's repository in
 * the git-ignored .cache/m2) unless the jar is newer than every source. Returns whether it built.
 */
export function ensureStreamsJar(log: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): boolean {
  let jarTime = 0;
  try {
    jarTime = statSync(STREAMS_JAR).mtimeMs;
  } catch {
    // not built yet
  }
  if (jarTime > newestSource(STREAMS_PROJECT)) return false;
  log('building the Kafka Streams anchor with Maven (first run: downloads Kafka Streams from Maven Central)');
  const env = { ...process.env, JAVA_HOME: path.dirname(path.dirname(findJava17())) };
  const build = spawnSync(
    'mvn',
    ['-q', '-B', `-Dmaven.repo.local=${path.join(PACKAGE_ROOT, '.cache', 'm2')}`, 'package'],
    { cwd: STREAMS_PROJECT, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 600_000 },
  );
  if (build.error || build.status !== 0) {
    const tail = `${build.stdout ?? ''}${build.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`building the Kafka Streams anchor failed (${build.error?.message ?? `exit ${build.status}`}):\n${tail}`);
  }
  return true;
}

export interface StreamsOptions {
  topic: string;
  brokers?: string[];
  /** Only recorded: the topic must already have its partitions. */
  partitions?: number;
  /** num.stream.threads; default 1 (Kafka Streams' default). */
  threads?: number;
  /** JVM max heap; default 1g. */
  heap?: string;
  /** Also emit an output per record to this topic (TotalsApp's output mode; it must exist). */
  outputTopic?: string;
  timeoutMs?: number;
  /** Called with the JVM's process once spawned (e.g. to sample its memory). */
  onChild?: (child: ChildProcess) => void;
  /** Runs once the committed offsets reached the end, before the JVM is stopped. */
  beforeStop?: (child: ChildProcess) => Promise<void>;
}

/** Waits up to `ms` for a child to exit, then SIGKILLs it. */
export async function stopChild(child: ChildProcess, ms: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the Kafka Streams anchor on `topic` with a fresh application.id and state directory, until
 * its committed offsets reach the end; then stops it and deletes its group, internal topics
 * (changelog) and state directory.
 */
export async function runKafkaStreams(options: StreamsOptions): Promise<ContestantResult> {
  const brokers = options.brokers ?? brokersFromEnv();
  ensureStreamsJar();
  const end = await readEndOffsets(options.topic, brokers);
  const records = totalOf(end);
  const applicationId = uniqueName('bench-streams');
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'kft-streams-'));
  const java = findJava17();
  const threads = options.threads ?? 1;
  const heap = options.heap ?? '1g';
  let child: ChildProcess | undefined;
  let exited: Error | undefined;
  let runningAt: bigint | undefined;
  let firstRecordAt: bigint | undefined;
  let firstRecordCpuMs: number | undefined;
  const stderrTail: string[] = [];

  const start = process.hrtime.bigint();
  try {
    child = spawn(
      java,
      [
        `-Xmx${heap}`,
        '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
        '-jar',
        STREAMS_JAR,
        brokers.join(','),
        applicationId,
        options.topic,
        stateDir,
        String(threads),
        ...(options.outputTopic ? [options.outputTopic] : []),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const proc = child;
    options.onChild?.(proc);
    proc.once('error', (err) => {
      exited = err;
    });
    proc.once('exit', (code, signal) => {
      exited = new Error(`the Kafka Streams anchor exited early (${signal ?? `exit ${code}`}):\n${stderrTail.join('\n')}`);
    });
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (line.startsWith('STATE RUNNING')) runningAt ??= process.hrtime.bigint();
      if (line.startsWith('FIRST_RECORD') && firstRecordAt === undefined) {
        firstRecordAt = process.hrtime.bigint();
        firstRecordCpuMs = processCpuMs(proc.pid);
      }
    });
    createInterface({ input: proc.stderr! }).on('line', (line) => {
      stderrTail.push(line);
      if (stderrTail.length > 30) stderrTail.shift();
      if (/FATAL|ERROR/.test(line)) process.stderr.write(`[kafka-streams] ${line}\n`);
    });
    const { reachedAt, firstCommitAt, firstCommitted } = await waitForCommittedEnd({
      groupId: applicationId,
      topic: options.topic,
      end,
      brokers,
      timeoutMs: options.timeoutMs ?? 600_000,
      label: `kafka streams ${options.topic}`,
      failure: () => exited,
    });
    const reachedCpuMs = processCpuMs(child.pid);
    await options.beforeStop?.(child);
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      steady: firstRecordAt === undefined ? undefined : {
              ms: Number(reachedAt - firstRecordAt) / 1e6,
              records,
              from: 'first record through mapValues',
              cpuMs: firstRecordCpuMs === undefined || reachedCpuMs === undefined ? undefined : reachedCpuMs - firstRecordCpuMs,
            },
      details: {
        running_after_ms: runningAt === undefined ? undefined : Math.round(Number(runningAt - start) / 1e6),
        first_record_after_ms: firstRecordAt === undefined ? undefined : Math.round(Number(firstRecordAt - start) / 1e6),
        first_commit_after_ms: Math.round(Number(firstCommitAt - start) / 1e6),
        first_committed: firstCommitted,
        threads,
        heap,
        application_id: applicationId,
      },
    };
  } finally {
    if (child) await stopChild(child, 30_000);
    await deleteTopics(await topicsWithPrefix(`${applicationId}-`, brokers).catch(() => []), brokers);
    await deleteGroups([applicationId], brokers);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** What the Java client's small transactions took (bench:persist experiment A's anchor). */
export interface JavaTransactionsResult {
  ms: number;
  median_ms: number;
  p90_ms: number;
}

/**
 * The Java client (kafka-clients of the anchor's Kafka version) writing `transactions` small
 * transactions one at a time on `topic` partition 0 — a record and an offset commit for `group`
 * each, like one snapshot write — on the same broker, in this process run.
 * `retryBackoffMs`: the producer's retry.backoff.ms (and its max), or 'default' (100 ms).
 */
export function runJavaTransactions(options: { topic: string; group: string; transactions: number; retryBackoffMs: number | 'default'; brokers?: string[] }): JavaTransactionsResult {
  ensureStreamsJar();
  const brokers = options.brokers ?? brokersFromEnv();
  const run = spawnSync(
    findJava17(),
    ['-Dorg.slf4j.simpleLogger.defaultLogLevel=warn', '-cp', STREAMS_JAR, 'kft.bench.TxnLatency', brokers.join(','), options.topic, options.group, String(options.transactions), String(options.retryBackoffMs)],
    { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 600_000 },
  );
  const line = (run.stdout ?? '').split('\n').find((l) => l.startsWith('{'));
  if (run.error || run.status !== 0 || !line) {
    throw new Error(`the Java transactions anchor failed (${run.error?.message ?? `exit ${run.status}`}):\n${(run.stderr ?? '').trim().split('\n').slice(-20).join('\n')}`);
  }
  return JSON.parse(line) as JavaTransactionsResult;
}
