// Worker processes of a flow module for the orchestration benchmarks (failover, orchestration):
// spawn `kafka-flow-temporal worker <module>` with the flow's names in the environment, keep every
// line it logs with the driver's receive time, ask the partition workflows for their status over
// one Temporal connection, and clean up (workflows, topics, group) afterwards.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Client } from '@temporalio/client';
import { type PartitionStatus, partitionWorkflowId, statusQuery } from '../../workflows/partition-workflow';
import { connectTemporal, type TemporalConnections } from '../../workers/temporal-connection';
import { stopChild } from './anchors';
import { benchKafka, deleteGroups, deleteTopics, topicsWithPrefix } from './records';
import { PACKAGE_ROOT } from './results';

export interface LoggedLine {
  /** Milliseconds since the driver started (performance.now()). */
  at: number;
  line: string;
  /** The pino record, when the line is one. */
  json?: { msg?: string; level?: number; [field: string]: unknown };
}

export interface FlowWorker {
  readonly name: string;
  readonly process: ChildProcess;
  readonly lines: LoggedLine[];
  readonly exited: Promise<number | null>;
  /** The line's arrival time of the first line matching, or undefined. */
  firstLine(match: (l: LoggedLine) => boolean, after?: number): LoggedLine | undefined;
  /** SIGTERM and wait (SIGKILL after `ms`); returns the exit code. */
  stop(ms?: number): Promise<number | null>;
  /** kill -9. */
  kill(): void;
}

export function spawnWorker(name: string, flowModule: string, env: NodeJS.ProcessEnv, logFile?: string): FlowWorker {
  const child = spawn(process.execPath, [path.join(PACKAGE_ROOT, 'bin', 'kafka-flow-temporal.js'), 'worker', flowModule], {
    cwd: PACKAGE_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
  });
  const lines: LoggedLine[] = [];
  const keep = (line: string) => {
    const entry: LoggedLine = { at: performance.now(), line };
    if (line.startsWith('{')) {
      try {
        entry.json = JSON.parse(line) as LoggedLine['json'];
      } catch {
        // not JSON after all
      }
    }
    lines.push(entry);
    if (lines.length > 20_000) lines.splice(0, 10_000);
    if (logFile) appendFileSync(logFile, `${Math.round(entry.at)} [${name}] ${line}\n`);
    if (entry.json && (entry.json.level ?? 0) >= 50) process.stderr.write(`[${name}] ${line}\n`);
  };
  createInterface({ input: child.stdout! }).on('line', keep);
  createInterface({ input: child.stderr! }).on('line', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    process: child,
    lines,
    exited,
    firstLine: (match, after = 0) => lines.find((l) => l.at >= after && match(l)),
    stop: (ms = 60_000) => stopChild(child, ms),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** Partition statuses over one Temporal connection; a query that does not answer in time counts as unknown. */
export class StatusWatcher {
  private constructor(
    private readonly temporal: TemporalConnections,
    readonly client: Client,
  ) {}

  static async connect(): Promise<StatusWatcher> {
    const temporal = await connectTemporal();
    return new StatusWatcher(temporal, temporal.client);
  }

  /** Each partition's status (undefined where the query failed or took longer than `timeoutMs`). */
  async statuses(flow: string, topic: string, partitions: number, timeoutMs = 2_000): Promise<Array<PartitionStatus | undefined>> {
    return Promise.all(
      Array.from({ length: partitions }, async (_, partition) => {
        const query = this.client.workflow.getHandle(partitionWorkflowId({ flow, topic, partition })).query(statusQuery);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), timeoutMs);
        });
        try {
          return await Promise.race([query.catch(() => undefined), timeout]);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /** Every partition running, on `owners` distinct task queues (any number if omitted). */
  async runningOn(flow: string, topic: string, partitions: number, owners?: number): Promise<PartitionStatus[] | undefined> {
    const rows = await this.statuses(flow, topic, partitions);
    if (!rows.every((r) => r?.phase === 'running')) return undefined;
    const all = rows as PartitionStatus[];
    const distinct = new Set(all.map((r) => r.owner?.taskQueue)).size;
    return owners === undefined || distinct === owners ? all : undefined;
  }

  async close(): Promise<void> {
    await this.temporal.close().catch(() => undefined);
  }
}

/** The group's committed offset of each partition (-1 where none). */
export async function committedOffsets(groupId: string, topic: string, brokers?: string[]): Promise<Map<number, bigint>> {
  const admin = benchKafka('bench-committed', brokers).admin();
  try {
    await admin.connect();
    const [response] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((response?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * Ends a run's partition workflows (they wait for a next assignment forever), whatever their
 * count: every open workflow whose KafkaFlow search attribute is the flow, plus the ids of the
 * given partitions in case the visibility store lags.
 */
export async function terminateFlowWorkflows(flow: string, topic: string, partitions: number): Promise<void> {
  let temporal: TemporalConnections | undefined;
  try {
    temporal = await connectTemporal();
    const client = temporal.client;
    const ids = new Set(Array.from({ length: partitions }, (_, partition) => partitionWorkflowId({ flow, topic, partition })));
    try {
      for await (const wf of client.workflow.list({ query: `KafkaFlow = "${flow}" AND ExecutionStatus = "Running"` })) ids.add(wf.workflowId);
    } catch {
      // visibility unavailable: the ids above still go
    }
    await Promise.all([...ids].map((id) => client.workflow.getHandle(id).terminate('benchmark run over').catch(() => undefined)));
  } catch (err) {
    process.stderr.write(`warning: could not terminate the partition workflows of ${flow}: ${(err as Error).message}\n`);
  } finally {
    await temporal?.close().catch(() => undefined);
  }
}

/** Topics named after the run (`<prefix>…`: input, snapshots, dead letters), and the group. */
export async function deleteRunTopicsAndGroup(prefix: string, groupId: string, brokers?: string[]): Promise<void> {
  await deleteTopics(await topicsWithPrefix(prefix, brokers).catch(() => []), brokers);
  await deleteGroups([groupId], brokers);
}
