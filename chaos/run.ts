// The chaos suite (issue 13): real worker processes of test/fixtures/chaosFlow.ts, started
// through the public CLI, on PRIVATE servers (their own ports and data dir; the shared ones are
// never touched), under a seeded random schedule of faults — kill -9 / SIGSTOP past the session
// timeout / graceful restarts / bursts of workers, kill -9 of the broker, restarts of Temporal and
// Cassandra, and network faults (drop, stall, delay) from a loopback TCP proxy in front of the
// broker and Temporal — while a producer per mode keeps input flowing. Three persistence modes run
// side by side: transactional Kafka, Kafka + local state (KFT_STATE_DIR per worker), Cassandra
// (LWT). After the faults: heal, let the workers catch up, stop them gracefully, then the oracle:
// per key, the persisted state (inspect) must equal a plain fold of the input topic, and the
// committed offsets must be at the log end.
//
// npm run chaos [-- --quick] [--seed N] [--faults N] [--seconds S] [--modes kafka,kafka-local,cassandra]
//                [--port-base 23000] [--keep-servers]
// npm run bench:chaos [-- --quick]   the same, writing bench/results/chaos.json
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin, Producer } from 'kafkajs';
import { isQuick } from '../bench/lib/args';
import { writeResults } from '../bench/lib/results';
import { printTable, type Row } from '../bench/lib/table';
import { createKafkaClient, KafkaAdmin, PartitionReader } from '../kafka';
import { inspectFlow } from '../workers/inspect';
import { type PartitionStatus, partitionWorkflowId, statusQuery } from '../workflows/partitionWorkflow';
import { connectTemporal, type TemporalConnections } from '../workers/temporalConnection';
import { type ChaosBackend, type ChaosState, type ChaosValue, chaosFlow } from '../test/fixtures/chaosFlow';
import { compareStates, describeWrongKey, type InputRecord, referenceFold, type Verdict } from './oracle';
import { countByType, FAULT_TYPES, type FaultType, faultTarget, type PlannedFault, planFaults, prng, splitPlan } from './schedule';
import { PrivateServers, portsFrom } from './servers';
import { TcpProxy } from './tcp-proxy';
import { type ChaosWorker, signal, WorkerPool } from './workers';

// ---------- settings ----------
const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const QUICK = isQuick();
const SEED = Number(flag('seed') ?? process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1e9));
const FAULTS = Number(flag('faults') ?? (QUICK ? 30 : 120));
const PHASE_MS = Number(flag('seconds') ?? (QUICK ? 90 : 600)) * 1000;
const MODE_IDS = (flag('modes') ?? 'kafka,kafka-local,cassandra').split(',').map((s) => s.trim()).filter(Boolean);
const PORT_BASE = Number(flag('port-base') ?? process.env.CHAOS_PORT_BASE ?? 23_000);
const KEEP_SERVERS = argv.includes('--keep-servers');
const WRITE_BENCH = argv.includes('--write-results');
/** All modes at once (one fault schedule over them all) instead of one mode after the other. */
const PARALLEL = argv.includes('--parallel');
const CASSANDRA_KILL9 = argv.includes('--cassandra-kill9');
const PARTITIONS = 4;
const KEYS = QUICK ? 40 : 100;
const RATE = QUICK ? 25 : 50; // records/s per mode
const WORKERS = Number(flag('workers') ?? 2); // per mode, at the start
const SESSION_TIMEOUT_MS = 6_000; // the broker's group.min.session.timeout.ms
const PERSIST_EVERY_MS = 1_000;
const CATCH_UP_MS = QUICK ? 120_000 : 240_000;
/** Catching up ends early when no partition has moved for this long. */
const CATCH_UP_IDLE_MS = 45_000;
const SAMPLE_EVERY_MS = 1_000;
/** SIGTERM → SIGKILL: past the worker's own --shutdown-timeout (60 s, then it exits 1 itself). */
const GRACE_MS = 75_000;
const STARTUP_MS = Number(flag('startup-timeout') ?? (QUICK ? 90 : 150)) * 1000;
const STATUS_EVERY_MS = 5_000;

interface ModeSpec {
  id: string;
  backend: ChaosBackend;
  local: boolean;
}
const MODE_SPECS: Record<string, ModeSpec> = {
  kafka: { id: 'kafka', backend: 'kafka', local: false },
  'kafka-local': { id: 'kafka-local', backend: 'kafka', local: true },
  cassandra: { id: 'cassandra', backend: 'cassandra', local: false },
};

interface Mode {
  spec: ModeSpec;
  index: number;
  name: string;
  topic: string;
  pool: WorkerPool;
  producer: LoadProducer;
  definition: ReturnType<typeof chaosFlow>;
}

interface FaultRecord {
  index: number;
  type: FaultType;
  mode?: string;
  target?: string;
  plannedS: number;
  startedS?: number;
  healedS?: number;
  recoveryS?: number;
  /** No recovery seen: heal → end of sampling (a lower bound). */
  recoveryCensoredS?: number;
  note?: string;
  error?: string;
  skipped?: boolean;
}

const t0 = Date.now();
/** The checkout's commit (and whether it has uncommitted changes): workers run the working tree. */
const PRODUCT_COMMIT = (() => {
  try {
    const root = path.resolve(__dirname, '..');
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    return `${head}${dirty ? ' + uncommitted changes' : ''}`;
  } catch {
    return 'unknown';
  }
})();
const rel = (at = Date.now()) => Number(((at - t0) / 1000).toFixed(1));
const say = (line: string) => process.stdout.write(`[${rel().toFixed(1).padStart(6)} s] ${line}\n`);

// ---------- the producer: steady rate, retries on errors; only acknowledged sends counted ----------
class LoadProducer {
  acked = 0;
  errors = 0;
  private running = false;
  private loop?: Promise<void>;
  private readonly model = new Map<string, number>();
  private seq = 0;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly rnd: () => number,
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      const started = Date.now();
      let due = 0;
      while (this.running) {
        due = Math.floor(((Date.now() - started) / 1000) * RATE) - this.seq;
        if (due > 0) {
          const n = Math.min(due, 200);
          const messages = Array.from({ length: n }, () => this.next());
          try {
            await this.producer.send({ topic: this.topic, acks: -1, timeout: 10_000, messages });
            this.acked += n;
          } catch {
            this.errors++;
            await sleep(500);
          }
        }
        await sleep(100);
      }
    })();
  }

  /** inc when the key's (modelled) counter is 0, else inc or dec at even odds: keys die and come back. */
  private next(): { key: string; value: string } {
    const key = `k${Math.floor(this.rnd() * KEYS)}`;
    const c = this.model.get(key) ?? 0;
    const op: ChaosValue['op'] = c === 0 || this.rnd() < 0.55 ? 'inc' : 'dec';
    this.model.set(key, op === 'inc' ? c + 1 : c - 1);
    return { key, value: JSON.stringify({ op, seq: this.seq++ }) };
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

// ---------- committed offsets vs log end: stalls and recoveries ----------
interface Offsets {
  committed: bigint;
  end: bigint;
}
interface PendingRecovery {
  record: FaultRecord;
  modes: number[];
  healedAt: number;
  baseline?: Map<string, bigint>;
}

class Sampler {
  readonly last = new Map<string, Offsets>();
  private readonly lastProgress = new Map<string, number>();
  maxStall = { ms: 0, key: '-', fromS: 0, toS: 0 };
  samples = 0;
  failedSamples = 0;
  private readonly pending: PendingRecovery[] = [];
  private lastMove = Date.now();
  private running = false;
  private loop?: Promise<void>;
  private admin?: Admin;

  constructor(
    private readonly modes: Mode[],
    private readonly brokers: string[],
  ) {}

  start(): void {
    this.running = true;
    const now = Date.now();
    for (const m of this.modes) for (let p = 0; p < PARTITIONS; p++) this.lastProgress.set(`${m.spec.id}/${p}`, now);
    this.loop = (async () => {
      while (this.running) {
        await this.sample();
        await sleep(SAMPLE_EVERY_MS);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.admin?.disconnect().catch(() => undefined);
  }

  watchRecovery(record: FaultRecord, modes: number[]): void {
    this.pending.push({ record, modes, healedAt: Date.now() });
  }

  unrecovered(): FaultRecord[] {
    return this.pending.map((p) => p.record);
  }

  private async offsets(m: Mode): Promise<Map<number, Offsets>> {
    if (!this.admin) {
      this.admin = createKafkaClient({ brokers: this.brokers, clientId: 'chaos-sampler', logLevel: 'nothing' }).kafka.admin({ retry: { retries: 0 } });
      await this.admin.connect();
    }
    const [committed] = await this.admin.fetchOffsets({ groupId: m.name, topics: [m.topic] });
    const ends = await this.admin.fetchTopicOffsets(m.topic);
    const out = new Map<number, Offsets>();
    for (const e of ends) {
      const c = committed?.partitions.find((x) => x.partition === e.partition)?.offset ?? '-1';
      out.set(e.partition, { committed: BigInt(c), end: BigInt(e.high) });
    }
    return out;
  }

  async sample(): Promise<void> {
    let all: Array<Map<number, Offsets>>;
    try {
      all = await withTimeout(Promise.all(this.modes.map((m) => this.offsets(m))), 5_000);
    } catch {
      this.failedSamples++;
      const admin = this.admin;
      this.admin = undefined;
      await admin?.disconnect().catch(() => undefined);
      return;
    }
    this.samples++;
    const now = Date.now();
    this.modes.forEach((m, i) => {
      for (const [p, o] of all[i]!) {
        const key = `${m.spec.id}/${p}`;
        const before = this.last.get(key);
        if (before && before.committed !== o.committed) this.lastMove = now;
        if (!before || before.committed !== o.committed || o.committed >= o.end) this.lastProgress.set(key, now);
        const since = this.lastProgress.get(key) ?? now;
        if (now - since > this.maxStall.ms) this.maxStall = { ms: now - since, key, fromS: rel(since), toS: rel(now) };
        this.last.set(key, o);
      }
    });
    for (const r of [...this.pending]) {
      const keys = r.modes.flatMap((i) => Array.from({ length: PARTITIONS }, (_, p) => `${this.modes[i]!.spec.id}/${p}`));
      if (!r.baseline) {
        if (now - r.healedAt < 0) continue;
        r.baseline = new Map(keys.map((k) => [k, this.last.get(k)?.committed ?? -1n]));
        continue;
      }
      const done = keys.every((k) => {
        const o = this.last.get(k);
        return o !== undefined && (o.committed > r.baseline!.get(k)! || o.committed >= o.end);
      });
      if (done) {
        r.record.recoveryS = Number(((now - r.healedAt) / 1000).toFixed(1));
        this.pending.splice(this.pending.indexOf(r), 1);
      }
    }
  }

  /** The last time any partition's committed offset moved. */
  lastAnyProgress(): number {
    return this.lastMove;
  }

  caughtUp(): boolean {
    return this.modes.every((m) => Array.from({ length: PARTITIONS }, (_, p) => this.last.get(`${m.spec.id}/${p}`)).every((o) => o && o.committed === o.end));
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]);
}

// ---------- partition status (Temporal, directly) ----------
let temporalForStatus: Promise<TemporalConnections> | undefined;

/**
 * Each partition's status query, over one connection kept for the run (closing a connection
 * while a timed-out query is still being retried by the client throws from a timer).
 */
async function statuses(m: Mode): Promise<Array<PartitionStatus | undefined>> {
  temporalForStatus ??= connectTemporal();
  let temporal: TemporalConnections;
  try {
    temporal = await withTimeout(temporalForStatus, 5_000);
  } catch (err) {
    temporalForStatus = undefined;
    throw err;
  }
  return Promise.all(
    Array.from({ length: PARTITIONS }, (_, partition) =>
      withTimeout(temporal.client.workflow.getHandle(partitionWorkflowId({ flow: m.name, topic: m.topic, partition })).query(statusQuery), 3_000).catch(
        () => undefined,
      ),
    ),
  );
}

const statusLine = (s: PartitionStatus | undefined, p: number) =>
  s
    ? `p${p} ${s.phase} gen=${s.owner?.generation ?? '-'} owner=${s.owner?.taskQueue.split('/').slice(-2).join('/') ?? '-'} committed=${s.committedOffset ?? '-'} lag=${s.lag ?? '-'}${s.lastError ? ` lastError=${s.lastError.slice(0, 300)}` : ''}`
    : `p${p} (no answer)`;

// ---------- main ----------
async function main(): Promise<number> {
  const unknown = MODE_IDS.filter((id) => !MODE_SPECS[id]);
  if (unknown.length > 0) throw new Error(`unknown mode(s) ${unknown.join(', ')}; modes: ${Object.keys(MODE_SPECS).join(', ')}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-chaos-'));
  const logDir = path.join(dir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const withCassandra = MODE_IDS.includes('cassandra');
  const servers = new PrivateServers(path.join(dir, 'data'), portsFrom(PORT_BASE), withCassandra);
  // The driver (producer, sampler, status, inspect) talks to the private servers directly.
  Object.assign(process.env, servers.directEnv);
  say(`chaos: seed ${SEED}, ${FAULTS} faults over ${PHASE_MS / 1000} s, modes ${MODE_IDS.join(', ')} (${PARALLEL ? 'all at once' : 'one after the other, each its share of the faults and of the time'}), ${PARTITIONS} partitions, ${KEYS} keys, ${RATE} records/s per mode${QUICK ? ' (quick)' : ''}`);
  say(`worker logs, server data and the fault log: ${dir}`);
  say(`product code: ${PRODUCT_COMMIT} (workers run this checkout as it is when each one starts)`);

  const faultLog: FaultRecord[] = [];
  const startupProblems: string[] = [];
  const events: string[] = [];
  const event = (line: string) => {
    events.push(`${rel().toFixed(1)} s ${line}`);
    say(line);
  };
  const proxies = {
    kafka: new TcpProxy('kafka', servers.ports.kafkaProxy, { host: '127.0.0.1', port: servers.ports.kafkaProxied }),
    temporal: new TcpProxy('temporal', servers.ports.temporalProxy, { host: '127.0.0.1', port: servers.ports.temporal }),
  };
  const modes: Mode[] = [];
  const samplers: Sampler[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  const timeline: string[] = [];
  const verdicts: Array<{ mode: Mode; verdict: Verdict; records: number; partitionOf: Map<string, number>; history: Map<string, InputRecord[]>; inspectError?: string }> = [];
  const stuck: string[] = [];
  const unrecovered: FaultRecord[] = [];
  const caughtUp: Array<number | undefined> = [];
  const offsetsAtEnd: boolean[] = [];
  const exits: Array<{ name: string; code: number | null; killed: boolean }> = [];
  const brokers = [servers.directEnv.KAFKA_BROKERS!];
  // Ctrl-C: the workers and the private servers go too.
  process.once('SIGINT', () => {
    say('interrupted: killing the workers, stopping the private servers');
    void Promise.all(modes.map((m) => m.pool.killAll()))
      .then(() => servers.down())
      .finally(() => process.exit(130));
  });
  const client = createKafkaClient({ brokers, clientId: 'chaos-driver', logLevel: 'nothing' });
  const producers: Producer[] = [];
  try {
    say('starting private servers');
    await servers.up((line) => say(`  ${line}`));
    await proxies.kafka.start();
    await proxies.temporal.start();
    say(`servers up: kafka ${brokers[0]} (workers via proxy :${servers.ports.kafkaProxy}), temporal ${servers.directEnv.TEMPORAL_ADDRESS} (workers via proxy :${servers.ports.temporalProxy})${withCassandra ? `, cassandra ${servers.directEnv.CASSANDRA_CONTACT_POINTS}` : ''}`);

    const admin = new KafkaAdmin(client);
    await admin.connect();
    const runId = `${SEED.toString(36)}-${Date.now().toString(36)}`;
    for (const [index, id] of MODE_IDS.entries()) {
      const spec = MODE_SPECS[id]!;
      const name = `chaos-${id}-${runId}`;
      await admin.ensureTopics([{ topic: name, partitions: PARTITIONS }], 120_000);
      const producer = client.kafka.producer({ retry: { retries: 3 } });
      await producer.connect();
      producers.push(producer);
      const env = {
        ...servers.workerEnv,
        CHAOS_FLOW_NAME: name,
        CHAOS_FLOW_TOPIC: name,
        CHAOS_BACKEND: spec.backend,
        CHAOS_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        CHAOS_PERSIST_EVERY_MS: String(PERSIST_EVERY_MS),
        CHAOS_CASSANDRA_KEYSPACE: 'kafka_flow_chaos',
        TEMPORAL_LOG_LEVEL: 'warn',
      };
      const pool = new WorkerPool({ id, logDir, env, stateRoot: spec.local ? path.join(dir, 'state') : undefined, event });
      const definition = chaosFlow({ name, topic: name, backend: spec.backend, sessionTimeoutMs: SESSION_TIMEOUT_MS, persistEveryMs: PERSIST_EVERY_MS, keyspace: 'kafka_flow_chaos' });
      modes.push({ spec, index, name, topic: name, pool, producer: new LoadProducer(producer, name, prng(SEED + index + 1)), definition });
    }
    await admin.close();

    // ---------- per group of modes: workers, faults, catch-up, stop, oracle ----------
    const groups = PARALLEL ? [modes] : modes.map((m) => [m]);
    const fullPlan = planFaults({
      seed: SEED,
      faults: FAULTS,
      phaseMs: PHASE_MS,
      modes: MODE_IDS.length,
      cassandra: withCassandra,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
    });
    const plans = PARALLEL
      ? [fullPlan]
      : splitPlan(fullPlan, modes.length, PHASE_MS / modes.length, withCassandra ? MODE_IDS.indexOf('cassandra') : undefined);
    for (const [gi, group] of groups.entries()) {
      const plan = plans[gi]!;
      for (const m of group) {
        m.producer.start();
        for (let i = 0; i < WORKERS; i++) m.pool.start();
      }
      say(`[${group.map((m) => m.spec.id).join(', ')}] started ${WORKERS} workers per mode and the producers; waiting for every partition to run`);
      // A partition that does not reach `running` is a finding, not a reason to stop: it is recorded
      // (its status as evidence) and the run goes on (a later rebalance may or may not free it).
      const deadline = Date.now() + STARTUP_MS;
      const startup: string[] = [];
      for (const m of group) {
        for (;;) {
          const rows = await statuses(m).catch(() => []);
          if (rows.length === PARTITIONS && rows.every((r) => r?.phase === 'running')) break;
          if (Date.now() > deadline) {
            const bad = Array.from({ length: PARTITIONS }, (_, p) => p).filter((p) => rows[p]?.phase !== 'running');
            for (const p of bad) startup.push(`${m.spec.id} ${statusLine(rows[p], p)}`);
            event(`STARTUP: mode ${m.spec.id}: partitions not running ${STARTUP_MS / 1000} s after the workers started:\n    ${bad.map((p) => statusLine(rows[p], p)).join('\n    ')}`);
            break;
          }
          await sleep(1000);
        }
      }
      if (startup.length === 0) say('every partition is running');
      startupProblems.push(...startup);

      const sampler = new Sampler(group, brokers);
      samplers.push(sampler);
      sampler.start();
      // The partitions' workflow status every few seconds, for evidence (phase, owner, last error).
      const statusFile = path.join(dir, 'status.log');
      let statusRunning = true;
      const statusLoop = (async () => {
        while (statusRunning) {
          for (const m of group) {
            const rows = await statuses(m).catch(() => []);
            const lines = Array.from({ length: PARTITIONS }, (_, p) => `${rel().toFixed(1)} s ${m.spec.id} ${statusLine(rows[p], p)}`);
            fs.appendFileSync(statusFile, `${lines.join('\n')}\n`);
            timeline.push(...lines);
          }
          await sleep(STATUS_EVERY_MS);
        }
      })();
      cleanups.push(async () => {
        statusRunning = false;
        await statusLoop;
        await sampler.stop();
      });

      // ---------- the fault phase ----------
      const locks = new Map<string, Promise<void>>();
      const running: Promise<void>[] = [];
      const phaseStart = Date.now();
      say(`fault phase: ${plan.length} faults`);
      for (const f of plan) {
        const wait = phaseStart + f.at - Date.now();
        if (wait > 0) await sleep(wait);
        const record: FaultRecord = { index: faultLog.length, type: f.type, mode: f.mode === undefined ? undefined : group[f.mode]!.spec.id, plannedS: rel(phaseStart + f.at) };
        faultLog.push(record);
        const target = faultTarget(f);
        const serial = !f.type.startsWith('worker-');
        const previous = serial ? (locks.get(target) ?? Promise.resolve()) : Promise.resolve();
        const run = previous.then(() => executeFault(f, record, { modes: group, servers, proxies, sampler, event }));
        if (serial) locks.set(target, run);
        running.push(run);
      }
      await Promise.all(running);
      say('fault phase over; every fault healed');

      // ---------- catch up, stop, oracle ----------
      for (const m of group) await m.producer.stop();
      say(`producers stopped (${group.map((m) => `${m.spec.id} ${m.producer.acked} acked / ${m.producer.errors} send errors`).join(', ')}); waiting for the workers to catch up`);
      const catchUpStart = Date.now();
      // Gives up early when some partition is behind and none has moved for CATCH_UP_IDLE_MS.
      while (Date.now() - catchUpStart < CATCH_UP_MS && !sampler.caughtUp() && Date.now() - Math.max(sampler.lastAnyProgress(), catchUpStart) < CATCH_UP_IDLE_MS) await sleep(1000);
      const caughtUpS = sampler.caughtUp() ? rel() - rel(catchUpStart) : undefined;
      if (caughtUpS === undefined) {
        const before = stuck.length;
        for (const m of group) {
          const rows = await statuses(m).catch(() => []);
          const behind = Array.from({ length: PARTITIONS }, (_, p) => p).filter((p) => {
            const o = sampler!.last.get(`${m.spec.id}/${p}`);
            return !o || o.committed !== o.end;
          });
          for (const p of behind) {
            const o = sampler.last.get(`${m.spec.id}/${p}`);
            stuck.push(`${m.spec.id} ${statusLine(rows[p], p)} (committed ${o?.committed ?? '?'} / end ${o?.end ?? '?'})`);
          }
        }
        say(`NOT caught up (${CATCH_UP_MS / 1000} s at most, or ${CATCH_UP_IDLE_MS / 1000} s without any progress):\n  ${stuck.slice(before).join('\n  ')}`);
      } else say(`caught up ${caughtUpS.toFixed(1)} s after the producers stopped`);
      await cleanups.pop()!();
      const samplingEnd = Date.now();
      // A fault whose recovery was never seen counts with the time from its heal to the end of the
      // sampling (a lower bound): leaving it out would flatter the figure.
      for (const f of sampler.unrecovered()) {
        unrecovered.push(f);
        if (f.healedS !== undefined) f.recoveryCensoredS = Number((rel(samplingEnd) - f.healedS).toFixed(1));
      }
      caughtUp.push(caughtUpS);

      say('stopping the workers gracefully (SIGTERM)');
      const groupExits = (await Promise.all(group.map((m) => m.pool.stopAll(GRACE_MS)))).flat();
      exits.push(...groupExits);
      const badExits = groupExits.filter((e) => e.code !== 0 || e.killed);
      if (badExits.length > 0) say(`workers that did not exit 0: ${badExits.map((e) => `${e.name} code ${e.code}${e.killed ? ` (killed after ${GRACE_MS / 1000} s)` : ''}`).join(', ')}`);
      await sampler.sample();
      offsetsAtEnd.push(sampler.caughtUp());

      say('oracle: reference fold of each input topic vs inspect');
      for (const m of group) {
        const { records, partitionOf, history } = await readInput(client, m.topic);
        const expected = referenceFold(records);
        const actual = new Map<string, ChaosState>();
        let inspectError: string | undefined;
        try {
          for await (const k of inspectFlow(m.definition as never)) actual.set(k.key, k.state as ChaosState);
        } catch (err) {
          // e.g. the Cassandra keyspace was never created because nothing was ever persisted: every key counts as absent.
          inspectError = (err as Error).message.split('\n')[0];
          actual.clear();
          event(`inspect of mode ${m.spec.id} failed (all its keys count as absent): ${inspectError}`);
        }
        verdicts.push({ mode: m, verdict: compareStates(expected, actual), records: records.length, partitionOf, history, inspectError });
      }
    }

    // ---------- report ----------
    const applied = faultLog.filter((f) => !f.skipped && !f.error);
    const byType = countByType(applied);
    const recoveries = applied
      .flatMap((f) => (f.recoveryS !== undefined ? [f.recoveryS] : f.recoveryCensoredS !== undefined ? [f.recoveryCensoredS] : []))
      .sort((a, b) => a - b);
    const worst = samplers.reduce((a, x) => (x.maxStall.ms > a.maxStall.ms ? x : a), samplers[0]!);
    const maxStall = worst.maxStall;
    const allCaughtUp = caughtUp.every((c) => c !== undefined);
    const allAtEnd = offsetsAtEnd.every(Boolean);
    const p99 = recoveries.length ? recoveries[Math.min(recoveries.length - 1, Math.ceil(0.99 * recoveries.length) - 1)]! : 0;
    const wrong = verdicts.reduce((a, v) => a + v.verdict.wrongKeys.length, 0);
    const lost = verdicts.reduce((a, v) => a + v.verdict.lostRecords, 0);
    const duplicated = verdicts.reduce((a, v) => a + v.verdict.duplicatedRecords, 0);
    const maxStallS = Number((maxStall.ms / 1000).toFixed(1));
    const stallGoalS = SESSION_TIMEOUT_MS / 1000 + 30;
    const crashes = modes.reduce((a, m) => a + m.pool.crashes, 0);
    const figures: Record<string, number> = {
      chaos_faults: applied.length,
      ...Object.fromEntries(FAULT_TYPES.map((t) => [`chaos_faults_${t.replaceAll('-', '_')}`, byType[t]])),
      chaos_wrong_keys: wrong,
      chaos_lost_records: lost,
      chaos_duplicated_records: duplicated,
      chaos_max_stall_s: maxStallS,
      chaos_recovery_p99_s: p99,
      chaos_unrecovered_faults: unrecovered.length,
      chaos_records: verdicts.reduce((a, v) => a + v.records, 0),
      chaos_worker_crashes: crashes,
      chaos_workers_started: modes.reduce((a, m) => a + m.pool.all.length, 0),
      chaos_session_timeout_s: SESSION_TIMEOUT_MS / 1000,
      chaos_driver_errors: driverErrors,
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
        workers: v.mode.pool.all.length,
        crashes: v.mode.pool.crashes,
        inspect: v.inspectError ? 'FAILED' : 'ok',
      })),
    );
    const goals: Row[] = [
      { figure: 'chaos_faults', value: applied.length, goal: `>= ${QUICK ? 30 : 100}`, ok: applied.length >= (QUICK ? 30 : 100) ? 'yes' : 'NO' },
      { figure: 'chaos_wrong_keys', value: wrong, goal: '0', ok: wrong === 0 ? 'yes' : 'NO' },
      { figure: 'chaos_lost_records', value: lost, goal: '0', ok: lost === 0 ? 'yes' : 'NO' },
      { figure: 'chaos_duplicated_records', value: duplicated, goal: '0', ok: duplicated === 0 ? 'yes' : 'NO' },
      { figure: 'chaos_max_stall_s', value: maxStallS, goal: `< ${stallGoalS}`, ok: maxStallS < stallGoalS ? 'yes' : 'NO' },
      { figure: 'chaos_recovery_p99_s', value: p99, goal: '-', ok: '-' },
      { figure: 'caught up (committed = log end)', value: caughtUp.map((c) => (c === undefined ? 'no' : `${c.toFixed(1)} s`)).join(', '), goal: 'yes', ok: allCaughtUp ? 'yes' : 'NO' },
      { figure: 'offsets at end after the stop', value: offsetsAtEnd.map((o) => (o ? 'yes' : 'no')).join(', '), goal: 'yes', ok: allAtEnd ? 'yes' : 'NO' },
    ];
    printTable(`chaos (seed ${SEED}${QUICK ? ', quick' : ''}): max stall ${maxStallS} s on ${maxStall.key} from ${maxStall.fromS} s to ${maxStall.toS} s`, goals);
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
      modes: MODE_IDS,
      partitions: PARTITIONS,
      keys: KEYS,
      rate_records_per_s_per_mode: RATE,
      fault_phase_s: PHASE_MS / 1000,
      session_timeout_ms: SESSION_TIMEOUT_MS,
      persist_every_ms: PERSIST_EVERY_MS,
      stall: 'longest time a partition had committed < log end without its committed offset moving (sampled every second from the group offsets, owner or not)',
      recovery: 'from a fault healed until every partition of the affected mode(s) committed past its offset at the heal (or was at the log end)',
      lost_duplicated: 'per key, count (records folded since the key was last created) short of / beyond the reference',
      fault_log: faultLog,
      events,
      stuck,
      startup: startupProblems,
      worker_exits: exits,
      dir,
    };
    fs.writeFileSync(path.join(dir, 'faults.json'), `${JSON.stringify(faultLog, null, 2)}\n`);
    const file = writeResults('chaos', figures, { versions: { kafka: '4.3.1', temporalCli: '1.9.1', cassandra: '5.0.6' }, notes, outDir: WRITE_BENCH ? undefined : dir });
    say(`results: ${file}`);

    const failed = wrong > 0 || !allCaughtUp || !allAtEnd;
    if (wrong > 0) {
      process.stdout.write('\nWRONG KEYS (expected = reference fold of the input topic, actual = inspect):\n');
      for (const v of verdicts) {
        for (const w of v.verdict.wrongKeys.slice(0, 25)) {
          const h = (v.history.get(w.key) ?? []).slice(-6).map((r) => `${r.offset}:${r.value.op}`).join(' ');
          process.stdout.write(`  [${v.mode.spec.id} p${v.partitionOf.get(w.key) ?? '?'}] ${describeWrongKey(w)}; last records ${h}\n`);
        }
        if (v.verdict.wrongKeys.length > 25) process.stdout.write(`  [${v.mode.spec.id}] … ${v.verdict.wrongKeys.length - 25} more\n`);
      }
    }
    if (failed) process.stdout.write(`\nORACLE FAILED. Seed ${SEED}; worker logs in ${logDir}; fault log ${path.join(dir, 'faults.json')}; server logs ${servers.logFiles().join(', ')}\n`);
    else process.stdout.write(`\noracle passed. Logs kept in ${dir}\n`);
    return failed ? 1 : 0;
  } finally {
    for (const c of cleanups) await c().catch(() => undefined);
    for (const m of modes) await m.producer.stop().catch(() => undefined);
    await Promise.all(modes.map((m) => m.pool.killAll()));
    await Promise.all(producers.map((p) => p.disconnect().catch(() => undefined)));
    await temporalForStatus?.then((t) => t.close()).catch(() => undefined);
    await proxies.kafka.close().catch(() => undefined);
    await proxies.temporal.close().catch(() => undefined);
    if (!KEEP_SERVERS) {
      say('stopping the private servers');
      await servers.down().catch((err) => say(`servers down failed: ${(err as Error).message}`));
    } else say(`private servers left running (--keep-servers): KFT_DATA_DIR=${servers.dataDir} ${Object.entries(servers.directEnv).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  }
}

function formatFault(f: FaultRecord): string {
  const parts = [
    `#${String(f.index).padStart(3)}`,
    f.type.padEnd(20),
    (f.mode ?? '').padEnd(11),
    `planned ${f.plannedS.toFixed(1)} s`,
    f.startedS !== undefined ? `start ${f.startedS.toFixed(1)} s` : '',
    f.healedS !== undefined ? `healed ${f.healedS.toFixed(1)} s` : '',
    f.recoveryS !== undefined ? `recovered +${f.recoveryS} s` : f.skipped ? '' : `NO RECOVERY SEEN${f.recoveryCensoredS !== undefined ? ` (>= ${f.recoveryCensoredS} s)` : ''}`,
    f.target ? `target ${f.target}` : '',
    f.note ?? '',
    f.skipped ? 'SKIPPED' : '',
    f.error ? `ERROR ${f.error}` : '',
  ];
  return parts.filter(Boolean).join('  ');
}

interface FaultContext {
  modes: Mode[];
  servers: PrivateServers;
  proxies: { kafka: TcpProxy; temporal: TcpProxy };
  sampler: Sampler;
  event: (line: string) => void;
}

async function executeFault(f: PlannedFault, record: FaultRecord, ctx: FaultContext): Promise<void> {
  const mode = f.mode === undefined ? undefined : ctx.modes[f.mode];
  // Indices into ctx.modes (the group running), as the sampler knows them.
  const affected = f.mode !== undefined ? [f.mode] : ctx.modes.map((_, i) => i);
  const begin = () => {
    record.startedS = rel();
  };
  const healed = () => {
    record.healedS = rel();
    ctx.sampler.watchRecovery(record, affected);
  };
  try {
    if (mode) {
      const pool = mode.pool;
      if (f.type === 'worker-burst') {
        begin();
        const joined = Array.from({ length: f.size ?? 1 }, () => pool.start({ burst: true }));
        record.target = joined.map((w) => w.name).join(',');
        record.note = `${joined.length} joined for ${(f.durationMs / 1000).toFixed(1)} s`;
        await sleep(f.durationMs);
        await Promise.all(joined.map((w) => pool.stop(w, GRACE_MS)));
        healed();
        return;
      }
      const giveUp = Date.now() + 60_000;
      let victim: ChaosWorker | undefined = pool.pickIdle(f.pick);
      while (!victim && Date.now() < giveUp) {
        await sleep(500);
        victim = pool.pickIdle(f.pick);
      }
      if (!victim) {
        record.skipped = true;
        record.note = 'no idle worker within 60 s';
        return;
      }
      victim.busy = true;
      record.target = `${victim.name} (pid ${victim.child.pid})`;
      begin();
      if (f.type === 'worker-kill9') {
        await pool.kill9(victim);
        const next = pool.start({ stateDir: victim.stateDir });
        record.note = `replaced by ${next.name}`;
      } else if (f.type === 'worker-sigstop') {
        signal(victim, 'SIGSTOP');
        await sleep(f.durationMs);
        signal(victim, 'SIGCONT');
        victim.busy = false;
        record.note = `stopped ${(f.durationMs / 1000).toFixed(1)} s`;
      } else if (f.type === 'worker-restart') {
        const t = Date.now();
        const { code, killed } = await pool.stop(victim, GRACE_MS);
        const next = pool.start({ stateDir: victim.stateDir });
        record.note = `stopped in ${((Date.now() - t) / 1000).toFixed(1)} s (exit ${code}${killed ? `, KILLED after ${GRACE_MS / 1000} s` : ''}), replaced by ${next.name}`;
        if (code !== 0 || killed) {
          const why = killed ? ` (killed after ${GRACE_MS / 1000} s)` : code === -1 ? ` (killed by ${victim.child.signalCode}: still starting, before its signal handlers were installed?)` : '';
          ctx.event(`graceful stop of ${victim.name} ended with exit ${code}${why}; log ${victim.logFile}`);
        }
      }
      healed();
      return;
    }
    begin();
    const s = ctx.servers;
    switch (f.type) {
      case 'kafka-kill9':
        s.killKafka();
        await sleep(f.durationMs);
        await s.startKafka();
        record.note = `down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - record.startedS! - f.durationMs / 1000).toFixed(1)} s after its restart`;
        break;
      case 'temporal-restart':
        await s.stopTemporal();
        await sleep(f.durationMs);
        await s.startTemporal();
        record.note = `down ${(f.durationMs / 1000).toFixed(1)} s`;
        break;
      case 'cassandra-restart':
        // Graceful by default: infra starts Cassandra with -Dcassandra.unsafesystem=true, so a
        // kill -9 loses schema changes not yet flushed (the flow's keyspace vanished in a run),
        // an artefact of the dev-server settings; --cassandra-kill9 does it anyway.
        if (CASSANDRA_KILL9) s.killCassandra();
        else await s.stopCassandra();
        await sleep(f.durationMs);
        await s.startCassandra();
        record.note = `${CASSANDRA_KILL9 ? 'kill -9' : 'SIGTERM'}, down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - record.startedS! - f.durationMs / 1000).toFixed(1)} s after its restart`;
        break;
      default: {
        const proxy = f.type.startsWith('kafka-') ? ctx.proxies.kafka : ctx.proxies.temporal;
        const how = f.type.split('-').pop() as 'drop' | 'stall' | 'delay';
        proxy.setMode(how, f.delayMs);
        await sleep(f.durationMs);
        proxy.setMode('pass');
        record.note = `${how} ${(f.durationMs / 1000).toFixed(1)} s${how === 'delay' ? ` (+${f.delayMs} ms)` : ''}`;
      }
    }
    healed();
  } catch (err) {
    record.error = (err as Error).message.split('\n')[0];
    ctx.event(`fault #${f.index} ${f.type} failed: ${(err as Error).message}`);
  }
}

async function readInput(client: ReturnType<typeof createKafkaClient>, topic: string) {
  const reader = new PartitionReader(client);
  const records: InputRecord[] = [];
  const partitionOf = new Map<string, number>();
  const history = new Map<string, InputRecord[]>();
  try {
    for (let p = 0; p < PARTITIONS; p++) {
      await reader.read({
        topic,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            const rec: InputRecord = { partition: p, offset: r.offset, key: String(r.key), value: JSON.parse(String(r.value)) as ChaosValue };
            records.push(rec);
            partitionOf.set(rec.key, p);
            const h = history.get(rec.key) ?? [];
            if (h.length === 0) history.set(rec.key, h);
            h.push(rec);
          }
        },
      });
    }
  } finally {
    await reader.close();
  }
  return { records, partitionOf, history };
}

// A chaos driver must not die half-way and leave private servers and workers behind: an error
// thrown from a timer (a client retrying on a connection the faults broke) is logged and counted.
let driverErrors = 0;
process.on('uncaughtException', (err) => {
  driverErrors++;
  process.stderr.write(`chaos: uncaught error in the driver (going on): ${err.stack ?? err.message}\n`);
});
process.on('unhandledRejection', (err) => {
  driverErrors++;
  process.stderr.write(`chaos: unhandled rejection in the driver (going on): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
});

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(2);
  },
);
