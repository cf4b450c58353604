// The chaos suite (issue 13): real worker processes of chaos/flow.ts, started
// through the public CLI, on PRIVATE servers (their own ports and data dir; the shared ones are
// never touched), under a seeded random schedule of faults — kill -9 / SIGSTOP past the session
// timeout / graceful restarts / bursts of workers, kill -9 of the broker, restarts of Temporal and
// Cassandra, and network faults (drop, stall, delay) from a loopback TCP proxy in front of the
// broker and Temporal — while a producer per mode keeps input flowing. Three persistence modes run
// side by side: transactional Kafka, Kafka + local state (KFT_STATE_DIR per worker), Cassandra
// (LWT). After the faults: heal, let the workers catch up, stop them gracefully, then the oracle:
// per key, the persisted state (inspect) must equal a plain fold of the input topic, the committed
// offsets must be at the log end, and the outputs the fold emits must each be in the output topic
// exactly once (transactional Kafka, read_committed) or at least once and exactly once after
// deduplication by their kafka-flow-source header (Cassandra).
//
// npm run chaos [-- --quick] [--parallel | --sequential] [--seed N] [--faults N] [--seconds S] [--modes kafka,kafka-local,cassandra,kafka-cache,cassandra-local]
//                [--port-base 23000] [--keep-servers]
// npm run bench:chaos [-- --quick]   the same, writing bench/results/chaos.json
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Producer } from 'kafkajs';
import { createKafkaClient, KafkaAdmin } from '../kafka';
import { type ChaosState, chaosDeadLetterTopic, chaosFlow, chaosOutputTopic } from './flow';
import { inspectFlow } from '../workers/cli/inspect';
import { CheckoutWatch } from './checkout-watch';
import { CpuLog } from './cpu';
import type { FaultRecord } from './fault-log';
import { executeFault, FAULT_KINDS } from './faults';
import { readDeadLetters, readInput, readOutputs } from './input';
import { LoadProducer } from './load-producer';
import { type Mode, MODE_SPECS } from './modes';
import { compareStates, OutputCheck } from './oracle';
import { Outages } from './outages';
import { type ModeVerdict, report } from './report';
import { Sampler } from './sampler';
import { faultTarget, onlyWeights, planFaults, prng, splitPlan } from './schedule';
import { PrivateServers, portsFrom } from './servers';
import {
  CASSANDRA_FENCING,
  CASSANDRA_KILL9,
  CASSANDRA_LAYOUT,
  CATCH_UP_IDLE_MS,
  CATCH_UP_MS,
  FAULTS,
  GRACE_MS,
  INSPECT_ATTEMPTS,
  KEEP_SERVERS,
  KEYS,
  MAX_PENDING_OUTPUTS,
  MAX_WRITES,
  MODE_IDS,
  PARALLEL,
  PARTITIONS,
  PERSIST_EVERY_MS,
  WORKFLOW_REPORT_EVERY_MS,
  PHASE_MS,
  PORT_BASE,
  PRODUCT_COMMIT,
  QUICK,
  TIMERS,
  RATE,
  rel,
  SEED,
  SERVER_REST_MS,
  SESSION_TIMEOUT_MS,
  STARTUP_MS,
  STATUS_EVERY_MS,
  say,
  WORKERS,
  FAULTS_ONLY,
} from './settings';
import { closeStatuses, statuses, statusLine } from './status';
import { TcpProxy } from './tcp-proxy';
import { WorkerPool } from './workers';

// ---------- main ----------
async function main(): Promise<number> {
  const unknown = MODE_IDS.filter((id) => !MODE_SPECS[id]);
  if (unknown.length > 0) throw new Error(`unknown mode(s) ${unknown.join(', ')}; modes: ${Object.keys(MODE_SPECS).join(', ')}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-chaos-'));
  const logDir = path.join(dir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const cassandraModes = MODE_IDS.filter((id) => MODE_SPECS[id]!.backend === 'cassandra');
  const withCassandra = cassandraModes.length > 0;
  const servers = new PrivateServers(path.join(dir, 'data'), portsFrom(PORT_BASE), withCassandra);
  // The driver (producer, sampler, status, inspect) talks to the private servers directly.
  Object.assign(process.env, servers.directEnv);
  say(`chaos: seed ${SEED}, ${FAULTS} faults over ${PHASE_MS / 1000} s, modes ${MODE_IDS.join(', ')} (${PARALLEL ? 'all at once' : 'one after the other, each its share of the faults and of the time'}), ${PARTITIONS} partitions, ${KEYS} keys, ${RATE} records/s per mode${CASSANDRA_FENCING || CASSANDRA_LAYOUT ? `, cassandra fencing ${CASSANDRA_FENCING ?? 'default'} layout ${CASSANDRA_LAYOUT ?? 'default'}` : ''}${QUICK ? ' (quick)' : ''}`);
  say(`worker logs, server data and the fault log: ${dir}`);
  say(`product code: ${PRODUCT_COMMIT} (workers run this checkout as it is when each one starts: a change to it voids the run)`);
  const checkout = new CheckoutWatch(path.resolve(__dirname, '..')).start();

  const faultLog: FaultRecord[] = [];
  const startupProblems: string[] = [];
  const events: string[] = [];
  const event = (line: string) => {
    events.push(`${rel().toFixed(1)} s ${line}`);
    say(line);
  };
  const proxies = {
    kafka: new TcpProxy('kafka', servers.ports.kafkaProxy, { host: '127.0.0.1', port: servers.ports.kafkaProxied }, '127.0.0.1', true),
    temporal: new TcpProxy('temporal', servers.ports.temporalProxy, { host: '127.0.0.1', port: servers.ports.temporal }),
  };
  const modes: Mode[] = [];
  const outages = new Outages();
  const samplers: Sampler[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  const timeline: string[] = [];
  const verdicts: ModeVerdict[] = [];
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
        CHAOS_MAX_WRITES: String(MAX_WRITES),
        CHAOS_MAX_PENDING_OUTPUTS: String(MAX_PENDING_OUTPUTS),
        CHAOS_TIMERS: TIMERS,
        ...(spec.cacheShare !== undefined ? { KFT_STATE_CACHE_MAX_KEYS: String(Math.max(1, Math.floor(KEYS * spec.cacheShare))) } : {}),
        ...(spec.standbyReplicas !== undefined ? { KFT_STANDBY_REPLICAS: String(spec.standbyReplicas) } : {}),
        CHAOS_CASSANDRA_FENCING: CASSANDRA_FENCING ?? '',
        CHAOS_CASSANDRA_LAYOUT: CASSANDRA_LAYOUT ?? '',
        TEMPORAL_LOG_LEVEL: 'warn',
        ...(WORKFLOW_REPORT_EVERY_MS !== undefined ? { KFT_WORKFLOW_REPORT_EVERY_MS: String(WORKFLOW_REPORT_EVERY_MS) } : {}),
      };
      const pool = new WorkerPool({ id, logDir, env, stateRoot: spec.local ? path.join(dir, 'state') : undefined, event });
      const definition = chaosFlow({
        name,
        topic: name,
        backend: spec.backend,
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        persistEveryMs: PERSIST_EVERY_MS,
        keyspace: 'kafka_flow_chaos',
        maxWrites: MAX_WRITES,
        maxPendingOutputs: MAX_PENDING_OUTPUTS,
        cassandraFencing: CASSANDRA_FENCING,
        cassandraLayout: CASSANDRA_LAYOUT,
        timers: TIMERS === 'on',
      });
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
      weights: onlyWeights(FAULTS_ONLY),
    });
    const plans = PARALLEL
      ? [fullPlan]
      : splitPlan(fullPlan, modes.length, PHASE_MS / modes.length, withCassandra ? MODE_IDS.indexOf(cassandraModes[0]!) : undefined);
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

      const sampler = new Sampler(group, brokers, outages, path.join(dir, 'offsets.log'), new CpuLog(path.join(dir, 'cpu.log')));
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
        const serial = FAULT_KINDS[f.type].target !== 'workers';
        const previous = serial ? (locks.get(target) ?? Promise.resolve()) : Promise.resolve();
        const run = previous.then(() =>
          executeFault(f, record, { modes: group, servers, proxies, sampler, outages, event, rel, sessionTimeoutMs: SESSION_TIMEOUT_MS, graceMs: GRACE_MS, cassandraKill9: CASSANDRA_KILL9 }),
        );
        // A restarted server is up for a little while before its next fault: a server crashing
        // again the moment it is back (what back-to-back restarts came to) measures nothing but
        // the outage. The next fault on it waits; the run's other faults go on meanwhile.
        if (serial) locks.set(target, FAULT_KINDS[f.type].restart ? run.then(() => sleep(SERVER_REST_MS)) : run);
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
      // A fault whose recovery was never seen counts from its heal to the end of the sampling.
      unrecovered.push(...sampler.censor(samplingEnd));
      caughtUp.push(caughtUpS);

      say('stopping the workers gracefully (SIGTERM)');
      const groupExits = (await Promise.all(group.map((m) => m.pool.stopAll(GRACE_MS)))).flat();
      exits.push(...groupExits);
      const badExits = groupExits.filter((e) => e.code !== 0 || e.killed);
      if (badExits.length > 0) say(`workers that did not exit 0: ${badExits.map((e) => `${e.name} code ${e.code}${e.killed ? ` (killed after ${GRACE_MS / 1000} s)` : ''}`).join(', ')}`);
      await sampler.sample();
      offsetsAtEnd.push(sampler.caughtUp());

      say('oracle: reference fold of each input topic vs inspect, and its outputs vs the output topic');
      for (const m of group) {
        const reference = await readInput(client, m.topic, TIMERS === 'on');
        const actual = new Map<string, ChaosState>();
        let inspectError: string | undefined;
        // A read the servers refuse for a moment (a Cassandra node still warming after its restart,
        // a loaded machine) is read again; only a read that keeps failing counts every key absent
        // (e.g. the Cassandra keyspace was never created because nothing was ever persisted).
        for (let attempt = 1; attempt <= INSPECT_ATTEMPTS; attempt++) {
          actual.clear();
          try {
            for await (const k of inspectFlow(m.definition as never)) actual.set(k.key, k.state as ChaosState);
            inspectError = undefined;
            break;
          } catch (err) {
            inspectError = (err as Error).message.split('\n')[0];
            actual.clear();
            const last = attempt === INSPECT_ATTEMPTS;
            event(`inspect of mode ${m.spec.id} failed (attempt ${attempt} of ${INSPECT_ATTEMPTS}${last ? ': all its keys count as absent' : ', read again in 5 s'}): ${inspectError}`);
            if (!last) await sleep(5000);
          }
        }
        const delivery = m.spec.backend === 'kafka' ? 'exactly-once' : 'at-least-once';
        const outputs = new OutputCheck(reference.outputs, delivery);
        let outputsError: string | undefined;
        try {
          await readOutputs(client, chaosOutputTopic(m.topic), (o) => outputs.add(o));
        } catch (err) {
          // e.g. no worker ever started to create the topic: every output counts as lost.
          outputsError = (err as Error).message.split('\n')[0];
          event(`reading the outputs of mode ${m.spec.id} failed (all count as lost): ${outputsError}`);
        }
        // A dead letter carries the poison record's value as produced: compared as is.
        const deadLetters = new OutputCheck(reference.deadLetters, delivery, (v) => v);
        try {
          await readDeadLetters(client, chaosDeadLetterTopic(m.topic), (o) => deadLetters.add(o));
        } catch (err) {
          const why = (err as Error).message.split('\n')[0];
          outputsError = outputsError ? `${outputsError}; dead letters: ${why}` : `dead letters: ${why}`;
          event(`reading the dead letters of mode ${m.spec.id} failed (all count as lost): ${why}`);
        }
        verdicts.push({
          mode: m,
          verdict: compareStates(reference.states, actual),
          outputs: outputs.verdict(),
          deadLetters: deadLetters.verdict(),
          records: reference.log.length,
          log: reference.log,
          inspectError,
          outputsError,
        });
      }
    }

    return report({ outages, dir, logDir, servers, modes, samplers, faultLog, events, startupProblems, stuck, unrecovered, caughtUp, offsetsAtEnd, exits, timeline, verdicts, driverErrors, checkoutChanges: checkout.changes });
  } finally {
    checkout.close();
    for (const c of cleanups) await c().catch(() => undefined);
    for (const m of modes) await m.producer.stop().catch(() => undefined);
    await Promise.all(modes.map((m) => m.pool.killAll()));
    await Promise.all(producers.map((p) => p.disconnect().catch(() => undefined)));
    await closeStatuses();
    await proxies.kafka.close().catch(() => undefined);
    await proxies.temporal.close().catch(() => undefined);
    if (!KEEP_SERVERS) {
      say('stopping the private servers');
      await servers.down().catch((err) => say(`servers down failed: ${(err as Error).message}`));
    } else say(`private servers left running (--keep-servers): KFT_DATA_DIR=${servers.dataDir} ${Object.entries(servers.directEnv).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  }
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
