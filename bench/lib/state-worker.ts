// One worker process of bench/flows/totals.ts for bench:state: the flow's names, local state
// (KFT_STATE_DIR) and state cache bound (KFT_STATE_CACHE_MAX_KEYS) in its environment; what it
// prints read as it comes — the bench flow's markers (BENCH FIRST_FOLD / ALL_FOLDED / POS), the
// lines that time a restart (`partitions assigned`, `partition recovered`, `restored <topic>-<p>:
// …`), every warning and error — without keeping per-record lines; its memory sampled from
// /proc/<pid>/status (RssAnon: the heap and every other anonymous mapping; RssFile: file pages
// mapped, LMDB's data.mdb among them, which belong to the page cache) every `sampleEveryMs`.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { stopChild } from './anchors';
import { processCpuMs } from './cpu';
import { parseMetrics, type Sample, sumOf } from './prometheus';
import { PACKAGE_ROOT } from './results';
import { freePort } from '../../workers/observability/metrics-server';

export const TOTALS_FLOW = path.join(PACKAGE_ROOT, 'bench', 'flows', 'totals.ts');

/** A process's memory from /proc/<pid>/status, MiB. */
export interface MemorySample {
  /** ms since the driver started (performance.now()). */
  at: number;
  vmRss: number;
  rssAnon: number;
  rssFile: number;
  /** Records folded so far by this process (from the flow's positions; undefined before any). */
  folded?: number;
}

export function readMemory(pid: number | undefined): Omit<MemorySample, 'at' | 'folded'> | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) / 1024;
    const s = { vmRss: mb('VmRSS'), rssAnon: mb('RssAnon'), rssFile: mb('RssFile') };
    return Number.isFinite(s.vmRss) && Number.isFinite(s.rssAnon) ? s : undefined;
  } catch {
    return undefined;
  }
}

export interface StateWorkerOptions {
  /** A label for logs and errors. */
  name: string;
  /** Flow name, also its group and the prefix of its snapshot topic. */
  flow: string;
  topic: string;
  snapshotTopic: string;
  /** BENCH_RECORDS: the records this process will fold (its ALL_FOLDED marker). */
  records: number;
  /** The input's partitions (all assigned to this worker): when they all run is `allRunning`. */
  partitions: number;
  /** KFT_STATE_DIR; undefined: no local state. */
  stateDir?: string;
  /** KFT_STATE_CACHE_MAX_KEYS; undefined: no bound. */
  maxKeys?: number;
  /** Appends every line but the flow's positions here. */
  logFile?: string;
  sampleEveryMs?: number;
  brokers: string[];
}

export interface LogRecord {
  msg?: string;
  level?: number;
  [field: string]: unknown;
}

export interface RestoredLine {
  partition: number;
  fromLocal: number;
  fromTopic: number;
  ms: number;
  at: number;
}

export class StateWorker {
  readonly process: ChildProcess;
  readonly spawnedAt = performance.now();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly metricsPort: number;
  assignedAt?: number;
  firstFoldAt?: number;
  allFoldedAt?: number;
  cpuAtFirstFold?: number;
  cpuAtAllFolded?: number;
  /**
   * Every partition running (the last of `partitions` distinct `recovered` lines: each
   * partition's recovery done and its fold started) and the records folded by then (the worker's
   * kafka_flow_records_folded_total, read right after).
   */
  allRunning?: { at: number; folded: number };
  private readonly runningPartitions = new Set<number>();
  /**
   * When a partition was recovered again in its generation (`kept in-memory state`): its partition
   * workflow lost the fold loop's activity (a heartbeat timeout, say) and it paused until a new one ran.
   */
  readonly keptInMemory: number[] = [];
  /** The first partition's `recovered` line. */
  firstRunningAt?: number;
  /** The `partition recovered` lines: partition, keys loaded, when. */
  readonly recovered: Array<{ partition: number; keys: number; at: number }> = [];
  readonly restored: RestoredLine[] = [];
  /** Warnings and errors (level >= 40) by kind (the message with its ids and numbers masked): count, level, the first one. */
  readonly problems = new Map<string, { count: number; level: number; first: string }>();
  problemCount = 0;
  /** The last lines it printed (not positions), for a crash report. */
  readonly tail: string[] = [];
  readonly samples: MemorySample[] = [];
  /** Each partition's next offset to fold, as the flow last printed it. */
  readonly positions = new Map<number, number>();
  private readonly sampler: NodeJS.Timeout;

  constructor(
    readonly o: StateWorkerOptions,
    metricsPort: number,
  ) {
    this.metricsPort = metricsPort;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KAFKA_BROKERS: o.brokers.join(','),
      BENCH_TOPIC: o.topic,
      BENCH_GROUP: o.flow,
      BENCH_FLOW: o.flow,
      BENCH_BACKEND: 'kafka',
      BENCH_SNAPSHOT_TOPIC: o.snapshotTopic,
      BENCH_RECORDS: String(o.records),
      KFT_METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
      KFT_STATE_DIR: o.stateDir ?? '',
      KFT_STATE_CACHE_MAX_KEYS: o.maxKeys === undefined ? '' : String(o.maxKeys),
    };
    // BENCH_WORKER_NODE_ARGS: more node options for the worker (experiments: --cpu-prof, heap flags).
    const nodeArgs = process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    this.process = spawn(process.execPath, [...nodeArgs, path.join(PACKAGE_ROOT, 'bin', 'kafka-flow-temporal.js'), 'worker', TOTALS_FLOW], {
      cwd: PACKAGE_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve({ code, signal })));
    createInterface({ input: this.process.stdout! }).on('line', (l) => this.line(l));
    createInterface({ input: this.process.stderr! }).on('line', (l) => this.line(l));
    this.sampler = setInterval(() => this.sample(), o.sampleEveryMs ?? 500);
    this.exited.then(() => clearInterval(this.sampler));
  }

  static async start(o: StateWorkerOptions): Promise<StateWorker> {
    return new StateWorker(o, await freePort());
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  /** Records folded by this process, as far as its printed positions tell (a partition prints every 256 records). */
  foldedFrom(start: ReadonlyMap<number, number>): number {
    let n = 0;
    for (const [p, pos] of this.positions) n += pos - (start.get(p) ?? 0);
    return n;
  }

  sample(): MemorySample | undefined {
    const m = readMemory(this.pid);
    if (!m) return undefined;
    const s: MemorySample = { at: performance.now(), ...m, folded: this.positions.size > 0 ? this.foldedFrom(new Map()) : undefined };
    this.samples.push(s);
    return s;
  }

  /** Peak of a memory field over the samples (MiB). */
  peak(field: 'vmRss' | 'rssAnon' | 'rssFile'): number {
    return this.samples.reduce((m, s) => Math.max(m, s[field]), 0);
  }

  async metrics(): Promise<Sample[] | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, { signal: AbortSignal.timeout(5_000) });
      return response.ok ? parseMetrics(await response.text()) : undefined;
    } catch {
      return undefined;
    }
  }

  /** The flow's live keys (kafka_flow_keys_live, all partitions) and keys evicted so far. */
  async keys(): Promise<{ live: number; evicted: number } | undefined> {
    const m = await this.metrics();
    if (!m) return undefined;
    return { live: sumOf(m, 'kafka_flow_keys_live'), evicted: sumOf(m, 'kafka_flow_keys_evicted_total') };
  }

  /** The main thread's V8 heap (used, total) and memory outside it (external, array buffers), MiB, from its /metrics. */
  async heap(): Promise<{ used: number; total: number; external: number } | undefined> {
    const m = await this.metrics();
    if (!m) return undefined;
    const mb = (name: string) => Math.round(sumOf(m, name) / (1024 * 1024));
    return { used: mb('nodejs_heap_size_used_bytes'), total: mb('nodejs_heap_size_total_bytes'), external: mb('nodejs_external_memory_bytes') };
  }

  /** SIGTERM (a graceful stop: flush, commit, close the store, leave the group); SIGKILL after `ms`. */
  async stop(ms = 120_000): Promise<{ code: number | null; ms: number }> {
    const started = performance.now();
    const code = await stopChild(this.process, ms);
    clearInterval(this.sampler);
    return { code, ms: performance.now() - started };
  }

  kill(): void {
    clearInterval(this.sampler);
    if (this.running) this.process.kill('SIGKILL');
  }

  private line(line: string): void {
    const now = performance.now();
    if (line.startsWith('BENCH POS ')) {
      const [, partition, pos] = line.slice('BENCH POS '.length).split(' ').map(Number) as [number, number, number];
      this.positions.set(partition, pos);
      return;
    }
    if (this.o.logFile) appendFileSync(this.o.logFile, `${Math.round(now - this.spawnedAt)} [${this.o.name}] ${line}\n`);
    this.tail.push(line);
    if (this.tail.length > 60) this.tail.shift();
    if (line === 'BENCH FIRST_FOLD') {
      this.firstFoldAt ??= now;
      this.cpuAtFirstFold ??= processCpuMs(this.pid);
      return;
    }
    if (line === 'BENCH ALL_FOLDED') {
      this.allFoldedAt ??= now;
      this.cpuAtAllFolded ??= processCpuMs(this.pid);
      return;
    }
    if (!line.startsWith('{')) {
      // Not a log record: a crash (V8's "heap out of memory"), a stack trace.
      if (/FATAL|out of memory|Error/.test(line)) this.problem({ msg: line, level: 60 });
      return;
    }
    let j: LogRecord;
    try {
      j = JSON.parse(line) as LogRecord;
    } catch {
      return;
    }
    const msg = j.msg ?? '';
    if (msg === 'partitions assigned') this.assignedAt ??= now;
    else if (msg === 'recovered') this.partitionRunning(Number(j.partition));
    else if (msg === 'kept in-memory state') this.keptInMemory.push(now);
    else if (msg === 'partition recovered') this.recovered.push({ partition: Number(j.partition), keys: Number(j.keys), at: now });
    else {
      const m = /^restored .+-(\d+): (\d+) from local state, (\d+) from the topic, (\d+) ms$/.exec(msg);
      if (m) this.restored.push({ partition: Number(m[1]), fromLocal: Number(m[2]), fromTopic: Number(m[3]), ms: Number(m[4]), at: now });
    }
    if ((j.level ?? 0) >= 40) this.problem(j);
  }

  private partitionRunning(partition: number): void {
    this.firstRunningAt ??= performance.now();
    this.runningPartitions.add(partition);
    if (this.runningPartitions.size !== this.o.partitions || this.allRunning !== undefined) return;
    const at = performance.now();
    this.allRunning = { at, folded: Number.NaN };
    void this.metrics().then((m) => {
      if (m) this.allRunning = { at, folded: sumOf(m, 'kafka_flow_records_folded_total') };
    });
  }

  private problem(j: LogRecord): void {
    this.problemCount++;
    const text = `${j.msg ?? ''}${typeof j.error === 'string' ? `: ${j.error}` : ''}`;
    const kind = text
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<id>')
      .replace(/\d+/g, 'N')
      .slice(0, 240);
    const seen = this.problems.get(kind);
    if (seen) seen.count++;
    else this.problems.set(kind, { count: 1, level: j.level ?? 0, first: JSON.stringify(j).slice(0, 1_000) });
    if ((j.level ?? 0) >= 50) process.stderr.write(`[${this.o.name}] ${JSON.stringify(j).slice(0, 1_000)}\n`);
  }

}
