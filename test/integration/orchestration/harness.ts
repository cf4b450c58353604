import { type ChildProcess, spawn } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Compressor } from '../../../core/codec/compressor';
import { createKafkaClient, KafkaAdmin, PartitionReader, type ReadRecord } from '../../../kafka';
import { inspectFlow } from '../../../workers/cli/inspect';
import type { PartitionStatus } from '../../../workflows/partition-workflow';
import { flowStatus } from '../../../workers/cli/flow-status';
import { type HashState, type OffsetHashNames, offsetHashFlow, step } from '../../fixtures/offset-hash-flow';
import { kafkaBrokers, temporalAddress, temporalNamespace, unique } from '../../support/servers';

import { eventually } from '../../support/eventually';

export { eventually };

const root = path.resolve(__dirname, '../../..');
const bin = path.join(root, 'bin/kafka-flow-temporal.js');
const flowModule = path.join(root, 'test/fixtures/offset-hash-flow.ts');

/** A committed record of a snapshot partition. */
export interface SnapshotRecord {
  /** Its offset in the snapshot partition. */
  offset: string;
  key: string;
  /** The offset of the last input record folded into it, and the state; undefined for a tombstone. */
  snapshot?: { offset?: string; state?: HashState };
}

export interface Worker {
  name: string;
  process: ChildProcess;
  logFile: string;
  exited: Promise<number | null>;
}

/**
 * Real worker processes of the offset-hash flow on a fresh topic, and the checks the end-to-end
 * tests share: who runs what (the workflows' status), committed vs end offsets, and the persisted
 * state against a reference fold of the input topic.
 */
export class FlowCluster {
  readonly names: Required<Omit<OffsetHashNames, 'cassandraLayout' | 'cassandraFencing' | 'idleFlush' | 'maxPendingOutputs'>> &
    Pick<OffsetHashNames, 'cassandraLayout' | 'cassandraFencing' | 'idleFlush'>;
  readonly definition: ReturnType<typeof offsetHashFlow>;
  private readonly client = createKafkaClient({ brokers: kafkaBrokers, clientId: unique('harness'), logLevel: 'nothing' });
  // Idempotent: a send retried on a loaded machine (its answer late) must not write the input twice —
  // the tests count the input (5,000 records) and fold it as the reference.
  private readonly producer = this.client.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-e2e-'));
  private readonly workers: Worker[] = [];
  private produced = 0;

  constructor(
    readonly partitions: number,
    opts: {
      persistEveryMs?: number;
      sessionTimeoutMs?: number;
      keys?: number;
      env?: NodeJS.ProcessEnv;
      backend?: OffsetHashNames['backend'];
      cassandraLayout?: OffsetHashNames['cassandraLayout'];
      cassandraFencing?: OffsetHashNames['cassandraFencing'];
      idleFlush?: false;
    } = {},
  ) {
    const id = unique('e2e');
    this.names = {
      name: id,
      group: id,
      topic: id,
      backend: opts.backend ?? 'kafka',
      persistEveryMs: opts.persistEveryMs ?? 1000,
      sessionTimeoutMs: opts.sessionTimeoutMs ?? 6000,
      poisonEvery: 0,
      ...(opts.cassandraLayout ? { cassandraLayout: opts.cassandraLayout } : {}),
      ...(opts.cassandraFencing ? { cassandraFencing: opts.cassandraFencing } : {}),
      ...(opts.idleFlush === false ? { idleFlush: false as const } : {}),
    };
    this.definition = offsetHashFlow(this.names);
    this.keys = opts.keys ?? 50;
    this.env = opts.env ?? {};
  }
  private readonly keys: number;
  private readonly env: NodeJS.ProcessEnv;

  async start(): Promise<void> {
    const admin = new KafkaAdmin(this.client);
    await admin.connect();
    await admin.ensureTopics([{ topic: this.names.topic, partitions: this.partitions }]);
    await admin.close();
    await this.producer.connect();
  }

  async produce(n: number): Promise<void> {
    const from = this.produced;
    this.produced += n;
    for (let i = 0; i < n; i += 1000) {
      const size = Math.min(1000, n - i);
      await this.producer.send({
        topic: this.names.topic,
        messages: Array.from({ length: size }, (_, j) => ({ key: `k${(from + i + j) % this.keys}`, value: JSON.stringify({ n: from + i + j }) })),
      });
    }
  }

  /** How many records produce() has written to the input topic so far. */
  get producedCount(): number {
    return this.produced;
  }

  startWorker(name: string, env: NodeJS.ProcessEnv = {}): Worker {
    const logFile = path.join(this.dir, `${name}.log`);
    const log = fs.openSync(logFile, 'a');
    const child = spawn(process.execPath, [bin, 'worker', flowModule], {
      env: {
        ...process.env,
        TEST_FLOW_NAME: this.names.name,
        TEST_FLOW_GROUP: this.names.group,
        TEST_FLOW_TOPIC: this.names.topic,
        TEST_FLOW_BACKEND: this.names.backend,
        TEST_PERSIST_EVERY_MS: String(this.names.persistEveryMs),
        TEST_SESSION_TIMEOUT_MS: String(this.names.sessionTimeoutMs),
        ...(this.names.cassandraLayout ? { TEST_CASSANDRA_LAYOUT: this.names.cassandraLayout } : {}),
        ...(this.names.cassandraFencing ? { TEST_CASSANDRA_FENCING: this.names.cassandraFencing } : {}),
        ...(this.names.idleFlush === false ? { TEST_IDLE_FLUSH: 'off' } : {}),
        LOG_LEVEL: 'info',
        ...this.env,
        ...env,
      },
      stdio: ['ignore', log, log],
    });
    fs.closeSync(log);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const w = { name, process: child, logFile, exited };
    this.workers.push(w);
    return w;
  }

  log(w: Worker): string {
    return fs.readFileSync(w.logFile, 'utf8');
  }

  /** A worker's JSON log lines, parsed (a line torn by a kill is skipped). */
  logLines<T = Record<string, unknown>>(w: Worker): T[] {
    const out: T[] = [];
    for (const l of this.log(w).split('\n')) {
      if (!l.startsWith('{')) continue;
      try {
        out.push(JSON.parse(l) as T);
      } catch {
        // a torn line
      }
    }
    return out;
  }

  /** SIGTERM and wait: the worker flushes, commits, leaves the group. */
  async stop(w: Worker): Promise<number | null> {
    if (w.process.exitCode === null && w.process.signalCode === null) w.process.kill('SIGTERM');
    return w.exited;
  }

  status(): Promise<PartitionStatus[]> {
    return flowStatus(this.names.name);
  }

  /**
   * Every partition running on a live worker of this cluster, on exactly `owners` distinct
   * processes (by task queue). A workflow still showing a killed worker as its running owner (until
   * the group's session times out) does not count: right after a kill and a restart it would make
   * "running on one worker" hold before the new worker has joined.
   */
  async runningOn(owners?: number): Promise<PartitionStatus[] | undefined> {
    const rows = await this.status().catch(() => []);
    if (rows.length !== this.partitions || !rows.every((r) => r.phase === 'running' && this.liveOwner(r.owner?.taskQueue))) return undefined;
    const distinct = new Set(rows.map((r) => r.owner?.taskQueue)).size;
    return owners === undefined || distinct === owners ? rows : undefined;
  }

  /**
   * Why `runningOn(owners)` does not hold (undefined when it does): each partition that is not
   * running, with its phase, owner (generation, task queue), retry and last error; missing
   * partition workflows; or how many distinct owners the running ones have. For `eventually`'s
   * failure detail.
   */
  async describeNotRunning(owners?: number): Promise<string | undefined> {
    let rows: PartitionStatus[];
    try {
      rows = await this.status();
    } catch (err) {
      return `the partition workflows' status could not be read: ${String(err)}`;
    }
    const problems: string[] = [];
    const seen = new Set(rows.map((r) => r.partition));
    for (let p = 0; p < this.partitions; p++) if (!seen.has(p)) problems.push(`partition ${p}: no running workflow`);
    for (const r of rows) {
      if (r.phase === 'running' && !this.liveOwner(r.owner?.taskQueue)) {
        problems.push(`partition ${r.partition}: running on ${this.ownerName(r.owner?.taskQueue)}, which has exited (its session has not timed out yet)`);
        continue;
      }
      if (r.phase === 'running') continue;
      const owner = r.owner ? `generation ${r.owner.generation} on ${this.ownerName(r.owner.taskQueue)}` : 'no owner';
      const retry = r.retry ? `, retry ${r.retry.attempt} at ${new Date(r.retry.nextAt).toISOString()}` : '';
      problems.push(`partition ${r.partition}: ${r.phase} (${owner}${retry}${r.lastError ? `, lastError: ${r.lastError}` : ''})`);
    }
    if (problems.length === 0 && owners !== undefined) {
      const distinct = [...new Set(rows.map((r) => this.ownerName(r.owner?.taskQueue)))];
      if (distinct.length !== owners) {
        problems.push(`all running, on ${distinct.length} process(es) instead of ${owners}: ${rows.map((r) => `${r.partition}→${this.ownerName(r.owner?.taskQueue)}`).join(', ')}`);
      }
    }
    if (problems.length === 0) return undefined;
    // What the group last assigned, as each worker logged it: a workflow that never took up the
    // newest assignment shows here as an owner with an older generation.
    const assigned = this.workers.map((w) => {
      let last: { generation?: number; assignment?: unknown } | undefined;
      try {
        last = this.logLines<{ msg?: string; generation?: number; assignment?: unknown }>(w)
          .filter((l) => l.msg === 'partitions assigned')
          .at(-1);
      } catch {
        // no log yet
      }
      const state = w.process.exitCode !== null || w.process.signalCode !== null ? 'exited' : 'alive';
      return `${w.name} (pid ${w.process.pid}, ${state}): ${last ? `generation ${last.generation} ${JSON.stringify(last.assignment)}` : 'no assignment'}`;
    });
    return `${problems.join('; ')}. Last assignments logged: ${assigned.length > 0 ? assigned.join(', ') : 'none (no worker started)'}`;
  }

  /** Waits until `runningOn(owners)` holds; on timeout the error names each partition not running and its phase. */
  untilRunningOn(owners: number | undefined, what: string, timeoutMs = 90_000): Promise<PartitionStatus[]> {
    return eventually(what, () => this.runningOn(owners), timeoutMs, () => this.describeNotRunning(owners));
  }

  /** The worker started here whose process owns a task queue (`…/<pid>-<random>`). */
  private ownerWorker(taskQueue: string | undefined): Worker | undefined {
    if (taskQueue === undefined) return undefined;
    const pid = Number(/\/(\d+)-[^/]*$/.exec(taskQueue)?.[1]);
    return this.workers.find((x) => x.process.pid === pid);
  }

  /** The task queue's owner is a worker of this cluster that has not exited (a SIGSTOPped one counts: it lives). */
  private liveOwner(taskQueue: string | undefined): boolean {
    const w = this.ownerWorker(taskQueue);
    return w !== undefined && w.process.exitCode === null && w.process.signalCode === null;
  }

  /** A worker's name (as started here) for an owner task queue, or the task queue's last part. */
  private ownerName(taskQueue: string | undefined): string {
    if (taskQueue === undefined) return 'none';
    const w = this.ownerWorker(taskQueue);
    return w ? `worker ${w.name} (pid ${w.process.pid})` : taskQueue.split('/').slice(-1)[0]!;
  }

  /** The group's committed offsets equal the log end on every partition. */
  async caughtUp(): Promise<boolean> {
    const admin = this.client.kafka.admin();
    await admin.connect();
    try {
      const [committed] = await admin.fetchOffsets({ groupId: this.names.group, topics: [this.names.topic] });
      const ends = await admin.fetchTopicOffsets(this.names.topic);
      return ends.every((e) => committed?.partitions.find((c) => c.partition === e.partition)?.offset === e.high);
    } finally {
      await admin.disconnect();
    }
  }

  /** The group's committed offset of each partition ('-1': none). */
  async committedOffsets(): Promise<Map<number, string>> {
    const admin = this.client.kafka.admin();
    await admin.connect();
    try {
      const [committed] = await admin.fetchOffsets({ groupId: this.names.group, topics: [this.names.topic] });
      return new Map((committed?.partitions ?? []).map((c) => [c.partition, c.offset]));
    } finally {
      await admin.disconnect();
    }
  }

  /** Where each partition's committed offset stands against its end (and which partitions are not running), for failure messages. */
  async describeLag(): Promise<string> {
    const admin = this.client.kafka.admin();
    await admin.connect();
    try {
      const [committed] = await admin.fetchOffsets({ groupId: this.names.group, topics: [this.names.topic] });
      const ends = await admin.fetchTopicOffsets(this.names.topic);
      const lag = ends
        .sort((x, y) => x.partition - y.partition)
        .map((e) => `${e.partition}: committed ${committed?.partitions.find((c) => c.partition === e.partition)?.offset ?? '-'} of ${e.high}`)
        .join(', ');
      const notRunning = await this.describeNotRunning();
      return `${lag}${notRunning ? `; ${notRunning}` : ''}`;
    } finally {
      await admin.disconnect();
    }
  }

  /** Waits until `caughtUp()`; on timeout the error says where each partition stands. */
  untilCaughtUp(what: string, timeoutMs = 60_000): Promise<true> {
    return eventually(what, async () => (await this.caughtUp()) || undefined, timeoutMs, () => this.describeLag());
  }

  /** Every record of `topic` (read_committed, each partition from offset 0 to its end), with its partition. */
  async readTopic(topic: string, partitions: number, onRecord: (record: ReadRecord, partition: number) => void): Promise<void> {
    const reader = new PartitionReader(this.client);
    try {
      await reader.readTopic(topic, partitions, onRecord);
    } finally {
      await reader.close();
    }
  }

  /** A plain fold over the input topic: the only right answer. */
  async reference(): Promise<Map<string, HashState>> {
    const state = new Map<string, HashState>();
    await this.readTopic(this.names.topic, this.partitions, (r) => {
      const key = String(r.key);
      state.set(key, step(state.get(key), r.offset));
    });
    return state;
  }

  /** The flow's snapshot topic (transactional Kafka persistence): `<group>-<name>-snapshots`. */
  get snapshotTopic(): string {
    return `${this.names.group}-${this.names.name}-snapshots`;
  }

  /**
   * The committed records of one snapshot partition (read read_committed, no group), from
   * `fromOffset` up to `toOffset` (default: the log end when the read starts), with the log end.
   * Each record's snapshot (offset of the last folded input record, state) is decoded.
   */
  async snapshotRecords(
    partition: number,
    range: { fromOffset?: string; toOffset?: string } = {},
  ): Promise<{ logEnd: string; records: SnapshotRecord[] }> {
    const reader = new PartitionReader(this.client);
    try {
      const logEnd = await reader.logEndOffset(this.snapshotTopic, partition);
      const records: SnapshotRecord[] = [];
      await reader.read({
        topic: this.snapshotTopic,
        partition,
        fromOffset: range.fromOffset ?? '0',
        toOffset: range.toOffset ?? logEnd,
        stallTimeoutMs: 30_000,
        onRecords: (rs) => {
          for (const r of rs) records.push({ offset: r.offset, key: String(r.key), snapshot: decodeSnapshot(r.value) });
        },
      });
      return { logEnd, records };
    } finally {
      await reader.close();
    }
  }

  async persisted(): Promise<Map<string, HashState>> {
    const out = new Map<string, HashState>();
    for await (const k of inspectFlow(this.definition as never)) out.set(k.key, k.state as HashState);
    return out;
  }

  /** A Temporal client for the test's own look at the workflows (connected once, closed by close()). */
  async temporal(): Promise<Client> {
    this.temporalConnection ??= Connection.connect({ address: temporalAddress });
    return new Client({ connection: await this.temporalConnection, namespace: temporalNamespace });
  }
  private temporalConnection: Promise<Connection> | undefined;

  async close(): Promise<void> {
    for (const w of this.workers) if (w.process.exitCode === null && w.process.signalCode === null) w.process.kill('SIGKILL');
    await Promise.all(this.workers.map((w) => w.exited));
    await this.producer.disconnect().catch(() => undefined);
    await this.temporalConnection?.then((c) => c.close()).catch(() => undefined);
  }
}

const compressor = new Compressor();

/**
 * A snapshot record's value (kafka-flow's envelope `{"offset","metadata","value"}` framed by the
 * Compressor): the offset of the last folded record and the state; undefined for a tombstone or
 * bytes that do not decode.
 */
function decodeSnapshot(value: Buffer | null): SnapshotRecord['snapshot'] {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(compressor.decompress(value).toString('utf8')) as { offset?: number | string; value?: HashState };
    return { offset: parsed.offset === undefined ? undefined : String(parsed.offset), state: parsed.value };
  } catch {
    return undefined;
  }
}
