// Carrying out one planned fault: on a mode's workers, on a server, or through a TCP proxy.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultRecord } from './fault-log';
import { type Mode, ownerOf } from './modes';
import type { Outages } from './outages';
import type { Sampler } from './sampler';
import type { FaultType, PlannedFault } from './schedule';
import type { PrivateServers } from './servers';
import { CASSANDRA_KILL9, GRACE_MS, rel, SESSION_TIMEOUT_MS } from './settings';
import { KAFKA_API, type TcpProxy } from './tcp-proxy';
import { type ChaosWorker, signal } from './workers';

export interface FaultContext {
  modes: Mode[];
  servers: PrivateServers;
  proxies: { kafka: TcpProxy; temporal: TcpProxy };
  sampler: Sampler;
  outages: Outages;
  event: (line: string) => void;
}

/** What a fault on one worker does (the victim picked and held busy by executeFault); returns the note. */
type WorkerFault = (victim: ChaosWorker, f: PlannedFault, mode: Mode, ctx: FaultContext, record: FaultRecord) => Promise<string>;

/**
 * One worker's connections to a server stalled through that server's proxy, for the fault's
 * duration. Cut off from the broker, it cannot heartbeat: past the session timeout the group
 * gives its partitions away while it still reaches Temporal (a stale owner); cut off from
 * Temporal, it keeps its partitions but its activities cannot report — either way its partitions
 * make no progress while it is cut off, which counts as an owner outage.
 */
const cutOff =
  (server: 'kafka' | 'temporal'): WorkerFault =>
  async (victim, f, mode, ctx) => {
    const proxy = ctx.proxies[server];
    const pid = victim.child.pid!;
    const back = ctx.outages.begin(ownerOf(mode.spec));
    const open = proxy.cut(pid);
    await sleep(f.durationMs);
    proxy.uncut(pid);
    back();
    victim.busy = false;
    return `${server} cut off ${(f.durationMs / 1000).toFixed(1)} s (${open} connections open at the cut)`;
  };

const WORKER_FAULTS: Record<Exclude<Extract<FaultType, `worker-${string}`>, 'worker-burst'>, WorkerFault> = {
  'worker-kill9': async (victim, _f, mode, ctx) => {
    // Until its session times out, the group still counts the victim as the owner of its partitions.
    const at = Date.now();
    ctx.outages.begin(ownerOf(mode.spec), at)(at + SESSION_TIMEOUT_MS);
    await mode.pool.kill9(victim);
    return `replaced by ${mode.pool.start({ stateDir: victim.stateDir }).name}`;
  },
  'worker-sigstop': async (victim, f, mode, ctx) => {
    const at = Date.now();
    ctx.outages.begin(ownerOf(mode.spec), at)(at + SESSION_TIMEOUT_MS);
    signal(victim, 'SIGSTOP');
    await sleep(f.durationMs);
    signal(victim, 'SIGCONT');
    victim.busy = false;
    return `stopped ${(f.durationMs / 1000).toFixed(1)} s`;
  },
  'worker-restart': async (victim, _f, mode, ctx) => {
    const t = Date.now();
    const { code, killed } = await mode.pool.stop(victim, GRACE_MS);
    const next = mode.pool.start({ stateDir: victim.stateDir });
    if (code !== 0 || killed) {
      const why = killed ? ` (killed after ${GRACE_MS / 1000} s)` : code === -1 ? ` (killed by ${victim.child.signalCode}: still starting, before its signal handlers were installed?)` : '';
      ctx.event(`graceful stop of ${victim.name} ended with exit ${code}${why}; log ${victim.logFile}`);
    }
    return `stopped in ${((Date.now() - t) / 1000).toFixed(1)} s (exit ${code}${killed ? `, KILLED after ${GRACE_MS / 1000} s` : ''}), replaced by ${next.name}`;
  },
  'worker-kafka-cut': cutOff('kafka'),
  'worker-commit-cut': async (victim, f, _mode, ctx, record) => {
    const pid = victim.child.pid!;
    ctx.proxies.kafka.cutAfter(pid, [KAFKA_API.END_TXN, KAFKA_API.OFFSET_COMMIT]);
    await sleep(f.durationMs);
    const cuts = ctx.proxies.kafka.stopCutAfter(pid);
    record.commitsCut = cuts;
    victim.busy = false;
    return `${cuts} commit request(s) cut after in ${(f.durationMs / 1000).toFixed(1)} s`;
  },
  'worker-temporal-cut': cutOff('temporal'),
};

/** What a fault on a server, or on every worker's connections to one, does; returns the note. */
type ServerFault = (f: PlannedFault, ctx: FaultContext, startedS: number) => Promise<string>;

/** Every worker's connections to a server dropped, stalled or delayed through its proxy. */
const throughProxy =
  (server: 'kafka' | 'temporal', how: 'drop' | 'stall' | 'delay'): ServerFault =>
  async (f, ctx) => {
    // A dropping or stalling proxy cuts the workers off the server; a delay only slows them.
    const back = how === 'delay' ? () => undefined : ctx.outages.begin(server);
    ctx.proxies[server].setMode(how, f.delayMs);
    await sleep(f.durationMs);
    ctx.proxies[server].setMode('pass');
    back();
    return `${how} ${(f.durationMs / 1000).toFixed(1)} s${how === 'delay' ? ` (+${f.delayMs} ms)` : ''}`;
  };

const SERVER_FAULTS: Record<Exclude<FaultType, `worker-${string}`>, ServerFault> = {
  'kafka-kill9': async (f, { servers: s, outages }, startedS) => {
    const back = outages.begin('kafka');
    s.killKafka();
    await sleep(f.durationMs);
    await s.startKafka();
    back();
    return `down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - startedS - f.durationMs / 1000).toFixed(1)} s after its restart`;
  },
  'temporal-restart': async (f, { servers: s, outages }) => {
    const back = outages.begin('temporal');
    await s.stopTemporal();
    await sleep(f.durationMs);
    await s.startTemporal();
    back();
    return `down ${(f.durationMs / 1000).toFixed(1)} s`;
  },
  'cassandra-restart': async (f, { servers: s, outages }, startedS) => {
    // Graceful by default: infra starts Cassandra with -Dcassandra.unsafesystem=true, so a
    // kill -9 loses schema changes not yet flushed (the flow's keyspace vanished in a run),
    // an artefact of the dev-server settings; --cassandra-kill9 does it anyway.
    const back = outages.begin('cassandra');
    if (CASSANDRA_KILL9) s.killCassandra();
    else await s.stopCassandra();
    await sleep(f.durationMs);
    await s.startCassandra();
    back();
    return `${CASSANDRA_KILL9 ? 'kill -9' : 'SIGTERM'}, down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - startedS - f.durationMs / 1000).toFixed(1)} s after its restart`;
  },
  'kafka-proxy-drop': throughProxy('kafka', 'drop'),
  'kafka-proxy-stall': throughProxy('kafka', 'stall'),
  'kafka-proxy-delay': throughProxy('kafka', 'delay'),
  'temporal-proxy-drop': throughProxy('temporal', 'drop'),
  'temporal-proxy-stall': throughProxy('temporal', 'stall'),
  'temporal-proxy-delay': throughProxy('temporal', 'delay'),
};

export async function executeFault(f: PlannedFault, record: FaultRecord, ctx: FaultContext): Promise<void> {
  const mode = f.mode === undefined ? undefined : ctx.modes[f.mode];
  // Indices into ctx.modes (the group running), as the sampler knows them.
  const affected = f.mode !== undefined ? [f.mode] : ctx.modes.map((_, i) => i);
  const healed = () => {
    record.healedS = rel();
    ctx.sampler.watchRecovery(record, affected);
  };
  try {
    if (f.type === 'worker-burst') {
      const pool = mode!.pool;
      record.startedS = rel();
      const joined = Array.from({ length: f.size ?? 1 }, () => pool.start({ burst: true }));
      record.target = joined.map((w) => w.name).join(',');
      record.note = `${joined.length} joined for ${(f.durationMs / 1000).toFixed(1)} s`;
      await sleep(f.durationMs);
      await Promise.all(joined.map((w) => pool.stop(w, GRACE_MS)));
      healed();
      return;
    }
    if (mode) {
      const giveUp = Date.now() + 60_000;
      let victim: ChaosWorker | undefined = mode.pool.pickIdle(f.pick);
      while (!victim && Date.now() < giveUp) {
        await sleep(500);
        victim = mode.pool.pickIdle(f.pick);
      }
      if (!victim) {
        record.skipped = true;
        record.note = 'no idle worker within 60 s';
        return;
      }
      victim.busy = true;
      record.target = `${victim.name} (pid ${victim.child.pid})`;
      record.startedS = rel();
      record.note = await WORKER_FAULTS[f.type as keyof typeof WORKER_FAULTS](victim, f, mode, ctx, record);
      healed();
      return;
    }
    record.startedS = rel();
    record.note = await SERVER_FAULTS[f.type as keyof typeof SERVER_FAULTS](f, ctx, record.startedS);
    healed();
  } catch (err) {
    record.error = (err as Error).message.split('\n')[0];
    ctx.event(`fault #${f.index} ${f.type} failed: ${(err as Error).message}`);
  }
}
