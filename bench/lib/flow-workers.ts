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
import { searchAttributes } from '../../workflows/search-attributes';
import { connectTemporal, type TemporalConnections } from '../../workers/connect/temporal-connection';
import { createKafkaClient, PartitionReader } from '../../kafka';
import { inspectFlow } from '../../workers/cli/inspect';
import { type HashState, offsetHashFlow, step } from '../../test/fixtures/offset-hash-flow';
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

/** A partition workflow as the visibility store shows it (its search attributes). */
export interface VisiblePartition {
  partition?: number;
  phase?: string;
  generation?: number;
  /** The owner's consumer member id. */
  owner?: string;
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

  /** Each running partition workflow of `flow` as the visibility store has its search attributes (one list call). */
  async visiblePartitions(flow: string): Promise<VisiblePartition[]> {
    const out: VisiblePartition[] = [];
    for await (const wf of this.client.workflow.list({ query: `KafkaFlow = "${flow}" AND ExecutionStatus = "Running"` })) {
      const attrs = wf.typedSearchAttributes;
      out.push({
        partition: attrs.get(searchAttributes.partition),
        phase: attrs.get(searchAttributes.phase),
        generation: attrs.get(searchAttributes.generation),
        owner: attrs.get(searchAttributes.owner),
      });
    }
    return out;
  }

  /**
   * The same as runningOn, read from the visibility store (visiblePartitions) instead of a status
   * query per partition — at hundreds of partitions those queries, each a task a worker must
   * answer, load the workers being watched. Every partition `running`, on `owners` distinct members
   * (any number if omitted), each above generation `after` (if given); its generations, or undefined.
   */
  async runningByVisibility(flow: string, partitions: number, owners?: number, after = -1): Promise<number[] | undefined> {
    const generations: number[] = [];
    const members = new Set<string | undefined>();
    for (const p of await this.visiblePartitions(flow)) {
      if (p.partition === undefined || p.phase !== 'running' || (p.generation ?? -1) <= after) return undefined;
      generations[p.partition] = p.generation ?? -1;
      members.add(p.owner);
    }
    if (generations.filter(() => true).length !== partitions) return undefined;
    return owners === undefined || members.size === owners ? generations : undefined;
  }

  /**
   * Whether a rebalance from `before` (visiblePartitions at its start) has settled, read from the
   * visibility store: every partition `running`, on `owners` distinct members, and each either
   * still with the member it had (cooperative rebalancing leaves it in its generation) or with
   * another one in a newer generation.
   */
  async settledSince(flow: string, before: ReadonlyArray<VisiblePartition>, partitions: number, owners: number): Promise<boolean> {
    const was = new Map(before.map((p) => [p.partition, p]));
    const now = await this.visiblePartitions(flow);
    const members = new Set(now.map((p) => p.owner));
    if (new Set(now.map((p) => p.partition)).size !== partitions || members.size !== owners) return false;
    return now.every((p) => {
      const then = was.get(p.partition);
      if (p.phase !== 'running') return false;
      return then !== undefined && (p.owner === then.owner ? (p.generation ?? -1) >= (then.generation ?? -1) : (p.generation ?? -1) > (then.generation ?? -1));
    });
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

type BenchAdmin = ReturnType<ReturnType<typeof benchKafka>['admin']>;

/** The committed offset of each partition of `topic` for the group named like the topic. */
export async function committed(admin: BenchAdmin, topic: string): Promise<Map<number, bigint>> {
  const [response] = await admin.fetchOffsets({ groupId: topic, topics: [topic] });
  return new Map((response?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
}

/** Every partition's committed offset is at its log end. */
export async function caughtUp(admin: BenchAdmin, topic: string): Promise<boolean> {
  const now = await committed(admin, topic);
  const ends = await admin.fetchTopicOffsets(topic);
  return ends.every((e) => now.get(e.partition) === BigInt(e.high));
}

/**
 * The offset-hash flow's persisted state (inspect) against a plain fold of its input topic: per
 * key, count short of the reference = lost, count beyond it = duplicated, a hash that differs =
 * mismatched. All must be 0.
 */
export async function compareOffsetHash(names: Parameters<typeof offsetHashFlow>[0], partitions: number, brokers: string[]) {
  const client = createKafkaClient({ brokers, clientId: 'bench-reference', logLevel: 'error' });
  const reader = new PartitionReader(client);
  const reference = new Map<string, HashState>();
  let records = 0;
  try {
    for (let p = 0; p < partitions; p++) {
      await reader.read({
        topic: names.topic,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            const key = String(r.key);
            reference.set(key, step(reference.get(key), r.offset));
            records++;
          }
        },
      });
    }
  } finally {
    await reader.close();
  }
  const persisted = new Map<string, HashState>();
  for await (const k of inspectFlow(offsetHashFlow(names) as never)) persisted.set(k.key, k.state as HashState);
  return tallyOffsetHash(reference, persisted, records);
}

/**
 * Per key, the offset-hash state found (persisted, or a changelog's last value) against a plain fold
 * of the input: count short of the reference = lost, beyond it = duplicated, a hash or last offset
 * that differs (or a key the input never had) = mismatched.
 */
export function tallyOffsetHash(reference: Map<string, HashState>, found: Map<string, HashState>, records: number) {
  let lost = 0;
  let duplicated = 0;
  let mismatched = 0;
  for (const [key, want] of reference) {
    const got = found.get(key);
    const count = got?.count ?? 0;
    if (count < want.count) lost += want.count - count;
    if (count > want.count) duplicated += count - want.count;
    if (!got || got.hash !== want.hash || got.last !== want.last) mismatched++;
  }
  for (const [key, got] of found) {
    if (!reference.has(key)) {
      duplicated += got.count;
      mismatched++;
    }
  }
  return { records_in_topic: records, keys: reference.size, records_lost: lost, records_duplicated: duplicated, keys_mismatched: mismatched };
}

/** Polls `fn` until it gives a value; fails when a watched worker exits or at the deadline. */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs: number, watch: FlowWorker[]): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    for (const w of watch) if (w.process.exitCode !== null) throw new Error(`worker ${w.name} exited (${w.process.exitCode}) waiting for ${what}`);
    const v = await fn().catch(() => undefined);
    if (v !== undefined && v !== false) return v as T;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the offset-hash flow's worker processes need in their environment (test/fixtures/offset-hash-flow.ts). */
export function offsetHashEnv(id: string, persistEveryMs: number, sessionTimeoutMs: number): NodeJS.ProcessEnv {
  return {
    TEST_FLOW_NAME: id,
    TEST_FLOW_GROUP: id,
    TEST_FLOW_TOPIC: id,
    TEST_FLOW_BACKEND: 'kafka',
    TEST_PERSIST_EVERY_MS: String(persistEveryMs),
    TEST_SESSION_TIMEOUT_MS: String(sessionTimeoutMs),
    LOG_LEVEL: 'info',
  };
}

/** The part of a kafkajs producer a steady load uses. */
interface LoadProducer {
  send(record: { topic: string; acks: number; messages: Array<{ key: string; value: string }> }): Promise<unknown>;
}

/** The n-th record of a steady load. */
export type LoadMessage = (n: number) => { key: string; value: string };

/**
 * A steady input: every 50 ms, what is due at `rate` records/s since the start, each send
 * acknowledged (acks=all) before the next; keys `k<n mod keys>`, values `{"n": n}` — or what
 * `message` makes of n.
 */
export class SteadyLoad {
  produced = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(producer: LoadProducer, topic: string, rate: number, keys: number, message: LoadMessage = (n) => ({ key: `k${n % keys}`, value: JSON.stringify({ n }) })) {
    const started = performance.now();
    this.loop = (async () => {
      while (this.running) {
        const due = Math.floor(((performance.now() - started) / 1000) * rate) - this.produced;
        if (due > 0) {
          const from = this.produced;
          await producer.send({ topic, acks: -1, messages: Array.from({ length: due }, (_, j) => message(from + j)) });
          this.produced += due;
        }
        await sleep(50);
      }
    })();
  }

  /** Stops producing; rejects if a send failed. */
  stop(): Promise<void> {
    this.running = false;
    return this.loop;
  }
}

/** What a run of worker processes leaves behind: its load, workers, connections, workflows, topics and group. */
export interface FlowRun {
  id: string;
  partitions: number;
  brokers: string[];
  input?: SteadyLoad;
  workers: FlowWorker[];
  watcher?: StatusWatcher;
  producer: { disconnect(): Promise<void> };
  admin: { disconnect(): Promise<void> };
}

/** Ends a run whatever state it is in: the load stopped, every worker killed, everything it made removed. */
export async function endFlowRun(r: FlowRun): Promise<void> {
  await r.input?.stop().catch(() => undefined);
  for (const w of r.workers) w.kill();
  await Promise.all(r.workers.map((w) => w.exited));
  await r.watcher?.close();
  await r.producer.disconnect().catch(() => undefined);
  await r.admin.disconnect().catch(() => undefined);
  await terminateFlowWorkflows(r.id, r.id, r.partitions);
  await deleteRunTopicsAndGroup(r.id, r.id, r.brokers);
}

/** A benchmark's entry point: exit 0 (or the exit code it set), or 1 with the error on stderr. */
export function runMain(main: () => Promise<void>): void {
  main().then(
    () => process.exit(process.exitCode ?? 0),
    (err) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
