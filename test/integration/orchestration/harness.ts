import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createKafkaClient, KafkaAdmin, PartitionReader } from '../../../kafka';
import { inspectFlow } from '../../../workers/inspect';
import type { PartitionStatus } from '../../../workflows/partitionWorkflow';
import { flowStatus } from '../../../workers/flowStatus';
import { type HashState, type OffsetHashNames, offsetHashFlow, step } from '../../fixtures/offsetHashFlow';
import { kafkaBrokers, unique } from '../../support/servers';

export { eventually } from '../../support/eventually';

const root = path.resolve(__dirname, '../../..');
const bin = path.join(root, 'bin/kafka-flow-temporal.js');
const flowModule = path.join(root, 'test/fixtures/offsetHashFlow.ts');

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
  readonly names: Required<OffsetHashNames>;
  readonly definition: ReturnType<typeof offsetHashFlow>;
  private readonly client = createKafkaClient({ brokers: kafkaBrokers, clientId: unique('harness'), logLevel: 'nothing' });
  private readonly producer = this.client.kafka.producer();
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-e2e-'));
  private readonly workers: Worker[] = [];
  private produced = 0;

  constructor(
    readonly partitions: number,
    opts: { persistEveryMs?: number; sessionTimeoutMs?: number; keys?: number; env?: NodeJS.ProcessEnv; backend?: OffsetHashNames['backend'] } = {},
  ) {
    const id = unique('e2e');
    this.names = { name: id, group: id, topic: id, backend: opts.backend ?? 'kafka', persistEveryMs: opts.persistEveryMs ?? 1000, sessionTimeoutMs: opts.sessionTimeoutMs ?? 6000 };
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

  /** SIGTERM and wait: the worker flushes, commits, leaves the group. */
  async stop(w: Worker): Promise<number | null> {
    if (w.process.exitCode === null && w.process.signalCode === null) w.process.kill('SIGTERM');
    return w.exited;
  }

  status(): Promise<PartitionStatus[]> {
    return flowStatus(this.names.name);
  }

  /** Every partition running, on exactly `owners` distinct processes (by task queue). */
  async runningOn(owners?: number): Promise<PartitionStatus[] | undefined> {
    const rows = await this.status().catch(() => []);
    if (rows.length !== this.partitions || !rows.every((r) => r.phase === 'running')) return undefined;
    const distinct = new Set(rows.map((r) => r.owner?.taskQueue)).size;
    return owners === undefined || distinct === owners ? rows : undefined;
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

  /** A plain fold over the input topic: the only right answer. */
  async reference(): Promise<Map<string, HashState>> {
    const reader = new PartitionReader(this.client);
    const state = new Map<string, HashState>();
    try {
      for (let p = 0; p < this.partitions; p++) {
        await reader.read({
          topic: this.names.topic,
          partition: p,
          fromOffset: '0',
          onRecords: (records) => {
            for (const r of records) {
              const key = String(r.key);
              state.set(key, step(state.get(key), r.offset));
            }
          },
        });
      }
    } finally {
      await reader.close();
    }
    return state;
  }

  async persisted(): Promise<Map<string, HashState>> {
    const out = new Map<string, HashState>();
    for await (const k of inspectFlow(this.definition as never)) out.set(k.key, k.state as HashState);
    return out;
  }

  async close(): Promise<void> {
    for (const w of this.workers) if (w.process.exitCode === null && w.process.signalCode === null) w.process.kill('SIGKILL');
    await Promise.all(this.workers.map((w) => w.exited));
    await this.producer.disconnect().catch(() => undefined);
  }
}
