// This project as a contestant of bench:throughput: one worker process
// (`kafka-flow-temporal worker bench/flows/totals.ts`) folding the topic into running totals, timed
// like every contestant from spawning the process until the flow's group's committed offsets reach
// the input's end offsets (with the Kafka backend: until the last transaction carrying snapshots
// and offsets has committed). Then SIGTERM (flush, leave the group) and cleanup: the group, the
// snapshot topic, the partition workflows.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { brokersFromEnv } from '../../kafka/client';
import { partitionWorkflowId } from '../../workflows/partitionWorkflow';
import { connectTemporal } from '../../workers/temporalConnection';
import { stopChild } from './anchors';
import { readEndOffsets, totalOf, waitForCommittedEnd } from './committed';
import type { ContestantResult } from './raw';
import { deleteGroups, deleteTopics, topicsWithPrefix, uniqueName } from './records';
import { PACKAGE_ROOT } from './results';

export interface OursOptions {
  brokers?: string[];
  /** The flow's persistence: 'kafka' (transactional, the benchmark's subject) or 'memory'. Default BENCH_BACKEND or 'kafka'. */
  backend?: 'kafka' | 'memory';
  timeoutMs?: number;
}

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

  const start = process.hrtime.bigint();
  try {
    child = spawn(process.execPath, [path.join(PACKAGE_ROOT, 'bin', 'kafka-flow-temporal.js'), 'worker', FLOW_MODULE], {
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
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
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
      logTail.push(line);
      if (logTail.length > 30) logTail.shift();
      if (/"level":(50|60)/.test(line)) process.stderr.write(`[worker] ${line}\n`);
    };
    createInterface({ input: proc.stdout! }).on('line', keep);
    createInterface({ input: proc.stderr! }).on('line', keep);
    const { reachedAt, firstCommitAt } = await waitForCommittedEnd({
      groupId: flow,
      topic,
      end,
      brokers,
      timeoutMs: options.timeoutMs ?? 600_000,
      label: `ours (${backend}) ${topic}`,
      failure: () => exited,
    });
    return {
      ms: Number(reachedAt - start) / 1e6,
      records,
      details: { backend, flow, first_commit_after_ms: Math.round(Number(firstCommitAt - start) / 1e6) },
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
