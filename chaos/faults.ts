// Carrying out one planned fault: on a mode's workers, on a server, or through a TCP proxy.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultRecord } from './fault-log';
import { type Mode, ownerOf } from './modes';
import type { Outages } from './outages';
import type { Sampler } from './sampler';
import type { PlannedFault } from './schedule';
import type { PrivateServers } from './servers';
import { CASSANDRA_KILL9, GRACE_MS, rel, SESSION_TIMEOUT_MS } from './settings';
import type { TcpProxy } from './tcp-proxy';
import { type ChaosWorker, signal } from './workers';

export interface FaultContext {
  modes: Mode[];
  servers: PrivateServers;
  proxies: { kafka: TcpProxy; temporal: TcpProxy };
  sampler: Sampler;
  outages: Outages;
  event: (line: string) => void;
}

export async function executeFault(f: PlannedFault, record: FaultRecord, ctx: FaultContext): Promise<void> {
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
      if (f.type === 'worker-kill9' || f.type === 'worker-sigstop') {
        // Until its session times out, the group still counts the victim as the owner of its partitions.
        const at = Date.now();
        ctx.outages.begin(ownerOf(mode.spec), at)(at + SESSION_TIMEOUT_MS);
      }
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
      case 'kafka-kill9': {
        const back = ctx.outages.begin('kafka');
        s.killKafka();
        await sleep(f.durationMs);
        await s.startKafka();
        back();
        record.note = `down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - record.startedS! - f.durationMs / 1000).toFixed(1)} s after its restart`;
        break;
      }
      case 'temporal-restart': {
        const back = ctx.outages.begin('temporal');
        await s.stopTemporal();
        await sleep(f.durationMs);
        await s.startTemporal();
        back();
        record.note = `down ${(f.durationMs / 1000).toFixed(1)} s`;
        break;
      }
      case 'cassandra-restart': {
        // Graceful by default: infra starts Cassandra with -Dcassandra.unsafesystem=true, so a
        // kill -9 loses schema changes not yet flushed (the flow's keyspace vanished in a run),
        // an artefact of the dev-server settings; --cassandra-kill9 does it anyway.
        const back = ctx.outages.begin('cassandra');
        if (CASSANDRA_KILL9) s.killCassandra();
        else await s.stopCassandra();
        await sleep(f.durationMs);
        await s.startCassandra();
        back();
        record.note = `${CASSANDRA_KILL9 ? 'kill -9' : 'SIGTERM'}, down ${(f.durationMs / 1000).toFixed(1)} s, ready ${(rel() - record.startedS! - f.durationMs / 1000).toFixed(1)} s after its restart`;
        break;
      }
      default: {
        const proxy = f.type.startsWith('kafka-') ? ctx.proxies.kafka : ctx.proxies.temporal;
        const how = f.type.split('-').pop() as 'drop' | 'stall' | 'delay';
        // A dropping or stalling proxy cuts the workers off the server; a delay only slows them.
        const back = how === 'delay' ? () => undefined : ctx.outages.begin(f.type.startsWith('kafka-') ? 'kafka' : 'temporal');
        proxy.setMode(how, f.delayMs);
        await sleep(f.durationMs);
        proxy.setMode('pass');
        back();
        record.note = `${how} ${(f.durationMs / 1000).toFixed(1)} s${how === 'delay' ? ` (+${f.delayMs} ms)` : ''}`;
      }
    }
    healed();
  } catch (err) {
    record.error = (err as Error).message.split('\n')[0];
    ctx.event(`fault #${f.index} ${f.type} failed: ${(err as Error).message}`);
  }
}
