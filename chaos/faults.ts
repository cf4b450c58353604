// The chaos suite's fault kinds, one descriptor each (FAULT_KINDS): what a kind acts on and which
// modes it applies to, how the schedule plans it, how it is injected and healed, what is out while
// it lasts, and the note the fault log keeps. executeFault carries out one planned fault by its
// kind's descriptor; schedule.ts plans them from the same table.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultRecord } from './fault-log';
import { type Mode, ownerOf } from './modes';
import type { Outages, Server } from './outages';
import type { Sampler } from './sampler';
import type { PrivateServers } from './servers';
import { KAFKA_API, type TcpProxy } from './tcp-proxy';
import { type ChaosWorker, signal } from './workers';

/** What a fault acts on: one worker of a mode (`workers`), or a server. Two faults on one server never overlap; a mode's worker faults may. */
export type FaultTarget = 'workers' | 'kafka' | 'temporal' | 'cassandra';

export interface PlannedFault {
  index: number;
  /** Milliseconds after the fault phase starts. */
  at: number;
  type: FaultType;
  /** For worker faults: which persistence mode's workers (index into the run's modes). */
  mode?: number;
  /** How long the fault lasts (down, stopped, stalled, delayed, or a burst's stay). */
  durationMs: number;
  /** Added latency of a delay fault. */
  delayMs?: number;
  /** Workers joining in a burst. */
  size?: number;
  /** In [0, 1): chooses the victim among the workers alive when the fault starts. */
  pick: number;
}

/** What the faults act on, and the run's settings they need. */
export interface FaultContext {
  modes: Mode[];
  servers: PrivateServers;
  proxies: { kafka: TcpProxy; temporal: TcpProxy };
  sampler: Sampler;
  outages: Outages;
  event: (line: string) => void;
  /** Seconds since the run started (the fault log's clock). */
  rel: () => number;
  sessionTimeoutMs: number;
  /** A worker's graceful stop: SIGTERM, then SIGKILL after this long. */
  graceMs: number;
  /** cassandra-restart by kill -9 instead of a graceful stop. */
  cassandraKill9: boolean;
}

/** One planned fault being carried out. */
export interface FaultRun {
  f: PlannedFault;
  record: FaultRecord;
  ctx: FaultContext;
  /** A worker fault's mode. */
  mode?: Mode;
  /** A worker fault's victim (kinds with `victim`): picked idle, held busy until healed. */
  victim?: ChaosWorker;
}

export interface FaultKind<Held = unknown> {
  /** One line on what it does. */
  about: string;
  target: FaultTarget;
  /** The modes it applies to: `every` mode, or only the `cassandra` ones (planned only when one runs; in a run of one mode after another, in its turn). */
  modes: 'every' | 'cassandra';
  /** How often the schedule picks it (relative). */
  weight: number;
  /** Its duration and other parameters, drawn in this order from the schedule's random numbers. */
  plan: (between: (lo: number, hi: number) => number, sessionTimeoutMs: number) => Pick<PlannedFault, 'durationMs' | 'delayMs' | 'size'>;
  /** A worker fault on one idle worker of its mode (a burst adds workers instead). */
  victim?: true;
  /**
   * The victim it wants, among the idle workers: one for which this holds is waited for (up to
   * PREFER_WAIT_MS), then any idle worker is taken (the fault log says so).
   */
  prefer?: (ctx: FaultContext, w: ChaosWorker) => boolean;
  /**
   * What is out while it lasts, left out of the stall figure: its server, or for a worker fault the
   * mode's owner; until it is healed, or until the group's session timeout from its start (a worker
   * killed or frozen: the group cannot know before).
   */
  outage?: 'until-healed' | 'session-timeout';
  /** A server taken down: the next fault on it waits SERVER_REST_MS once this one is healed. */
  restart?: true;
  /** Starts the fault; it then lasts `durationMs`. Returns what heal needs. */
  inject(run: FaultRun): Promise<Held>;
  /** Ends it; returns the note the fault log keeps. */
  heal(run: FaultRun, held: Held): Promise<string>;
}

/** A descriptor, its `held` typed from its inject. */
const kind = <Held>(k: FaultKind<Held>): FaultKind<Held> => k;

/** How long a fault with a preferred victim waits for one (FaultKind.prefer) before it takes any idle worker. */
const PREFER_WAIT_MS = 20_000;
/** The commit requests: EndTxn of the snapshot transactions, the consumer's OffsetCommit (Cassandra). */
const COMMITS = [KAFKA_API.END_TXN, KAFKA_API.OFFSET_COMMIT];

const none = () => ({ durationMs: 0 });
const serverDown = (lo: number, hi: number) => (between: (lo: number, hi: number) => number) => ({ durationMs: between(lo, hi) });
const delay = (between: (lo: number, hi: number) => number) => ({ durationMs: between(3_000, 12_000), delayMs: between(100, 1_500) });
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * One worker's connections to a server stalled through that server's proxy, for the fault's
 * duration. Cut off from the broker, it cannot heartbeat: past the session timeout the group
 * gives its partitions away while it still reaches Temporal (a stale owner); cut off from
 * Temporal, it keeps its partitions but its activities cannot report — either way its partitions
 * make no progress while it is cut off, which counts as an owner outage.
 */
const cutOff = (server: 'kafka' | 'temporal', about: string, plan: FaultKind['plan']) =>
  kind({
    about,
    target: 'workers',
    modes: 'every',
    weight: 1.5,
    plan,
    victim: true,
    outage: 'until-healed',
    inject: async ({ victim, ctx }) => ({ open: ctx.proxies[server].cut(victim!.child.pid!) }),
    heal: async ({ victim, ctx, f }, { open }) => {
      ctx.proxies[server].uncut(victim!.child.pid!);
      victim!.busy = false;
      return `${server} cut off ${seconds(f.durationMs)} (${open} connections open at the cut)`;
    },
  });

/** Every worker's connections to a server dropped, stalled or delayed through its proxy (a delay only slows them: no outage). */
const throughProxy = (server: 'kafka' | 'temporal', how: 'drop' | 'stall' | 'delay', about: string, weight: number, plan: FaultKind['plan']) =>
  kind({
    about,
    target: server,
    modes: 'every',
    weight,
    plan,
    ...(how === 'delay' ? {} : { outage: 'until-healed' as const }),
    inject: async ({ ctx, f }) => ctx.proxies[server].setMode(how, f.delayMs),
    heal: async ({ ctx, f }) => {
      ctx.proxies[server].setMode('pass');
      return `${how} ${seconds(f.durationMs)}${how === 'delay' ? ` (+${f.delayMs} ms)` : ''}`;
    },
  });

/** How long after its restart a server was ready: what heal took beyond the fault's duration. */
const readyAfter = ({ ctx, record, f }: FaultRun) => (ctx.rel() - record.startedS! - f.durationMs / 1000).toFixed(1);

/**
 * Every fault kind, in the schedule's order. Worker faults most, server restarts less, network
 * faults in between. A `proxy` fault acts on every worker's connections through the server's
 * proxy; a `cut` fault on one worker's connections only (the others keep theirs).
 */
export const FAULT_KINDS = {
  'worker-kill9': kind({
    about: 'kill -9 of a worker, and a replacement started',
    target: 'workers',
    modes: 'every',
    weight: 4,
    plan: none,
    victim: true,
    outage: 'session-timeout',
    inject: ({ mode, victim }) => mode!.pool.kill9(victim!),
    heal: async ({ mode, victim }) => `replaced by ${mode!.pool.start({ stateDir: victim!.stateDir }).name}`,
  }),
  'worker-sigstop': kind({
    about: 'SIGSTOP past the consumer session timeout, then SIGCONT: a real stale owner',
    target: 'workers',
    modes: 'every',
    weight: 2,
    plan: (between, session) => ({ durationMs: session + between(2_000, 6_000) }),
    victim: true,
    outage: 'session-timeout',
    inject: async ({ victim }) => signal(victim!, 'SIGSTOP'),
    heal: async ({ victim, f }) => {
      signal(victim!, 'SIGCONT');
      victim!.busy = false;
      return `stopped ${seconds(f.durationMs)}`;
    },
  }),
  'worker-restart': kind({
    about: 'SIGTERM (graceful stop), then a new worker',
    target: 'workers',
    modes: 'every',
    weight: 3,
    plan: none,
    victim: true,
    inject: async ({ mode, victim, ctx }) => {
      const t = Date.now();
      return { t, ...(await mode!.pool.stop(victim!, ctx.graceMs)) };
    },
    heal: async ({ mode, victim, ctx }, { t, code, killed }) => {
      const next = mode!.pool.start({ stateDir: victim!.stateDir });
      if (code !== 0 || killed) {
        const why = killed ? ` (killed after ${ctx.graceMs / 1000} s)` : code === -1 ? ` (killed by ${victim!.child.signalCode}: still starting, before its signal handlers were installed?)` : '';
        ctx.event(`graceful stop of ${victim!.name} ended with exit ${code}${why}; log ${victim!.logFile}`);
      }
      return `stopped in ${((Date.now() - t) / 1000).toFixed(1)} s (exit ${code}${killed ? `, KILLED after ${ctx.graceMs / 1000} s` : ''}), replaced by ${next.name}`;
    },
  }),
  'worker-burst': kind({
    about: 'several workers join at once, and leave (SIGTERM) together later',
    target: 'workers',
    modes: 'every',
    weight: 2,
    plan: (between) => ({ size: between(1, 3), durationMs: between(5_000, 15_000) }),
    inject: async ({ mode, f, record }) => {
      const joined = Array.from({ length: f.size ?? 1 }, () => mode!.pool.start({ burst: true }));
      record.target = joined.map((w) => w.name).join(',');
      return joined;
    },
    heal: async ({ mode, f, ctx }, joined) => {
      await Promise.all(joined.map((w) => mode!.pool.stop(w, ctx.graceMs)));
      return `${joined.length} joined for ${seconds(f.durationMs)}`;
    },
  }),
  'worker-kafka-cut': cutOff(
    'kafka',
    "one worker's broker connections stalled (Temporal still reachable), from under to past the session timeout",
    (between, session) => ({ durationMs: between(2_000, session + 6_000) }),
  ),
  'worker-commit-cut': kind({
    about:
      "ambiguous commits: for a while, each of one worker's commits (EndTxn of its snapshot transactions, or the consumer's OffsetCommit with Cassandra) reaches the broker and its connection is then cut before the answer: the worker must learn what landed before writing again",
    target: 'workers',
    modes: 'every',
    weight: 2,
    plan: (between) => ({ durationMs: between(3_000, 12_000) }),
    victim: true,
    // A worker that committed in the last 3 s: under churn a worker just started (or holding no
    // partition after a rebalance) would see no commit to cut while the fault lasts.
    prefer: (ctx, w) => ctx.proxies.kafka.sentRecently(w.child.pid!, COMMITS, 3_000),
    inject: async ({ victim, ctx }) => ctx.proxies.kafka.cutAfter(victim!.child.pid!, COMMITS),
    heal: async ({ victim, ctx, f, record }) => {
      const cuts = ctx.proxies.kafka.stopCutAfter(victim!.child.pid!);
      record.commitsCut = cuts;
      victim!.busy = false;
      return `${cuts} commit request(s) cut after in ${seconds(f.durationMs)}`;
    },
  }),
  'worker-temporal-cut': cutOff('temporal', "one worker's Temporal connections stalled (the broker still reachable)", (between) => ({ durationMs: between(2_000, 15_000) })),
  'kafka-kill9': kind({
    about: 'kill -9 of the broker, restarted after a pause',
    target: 'kafka',
    modes: 'every',
    weight: 1,
    plan: serverDown(1_000, 5_000),
    outage: 'until-healed',
    restart: true,
    inject: async ({ ctx }) => ctx.servers.killKafka(),
    heal: async (run) => {
      await run.ctx.servers.startKafka();
      return `down ${seconds(run.f.durationMs)}, ready ${readyAfter(run)} s after its restart`;
    },
  }),
  'temporal-restart': kind({
    about: 'the Temporal dev server stopped (SIGTERM) and started again',
    target: 'temporal',
    modes: 'every',
    weight: 1.5,
    plan: serverDown(500, 4_000),
    outage: 'until-healed',
    restart: true,
    inject: ({ ctx }) => ctx.servers.stopTemporal(),
    heal: async ({ ctx, f }) => {
      await ctx.servers.startTemporal();
      return `down ${seconds(f.durationMs)}`;
    },
  }),
  'cassandra-restart': kind({
    // Graceful by default: infra starts Cassandra with -Dcassandra.unsafesystem=true, so a
    // kill -9 loses schema changes not yet flushed (the flow's keyspace vanished in a run),
    // an artefact of the dev-server settings; --cassandra-kill9 does it anyway.
    about: 'Cassandra stopped (or kill -9) and started again',
    target: 'cassandra',
    modes: 'cassandra',
    weight: 1,
    plan: serverDown(1_000, 5_000),
    outage: 'until-healed',
    restart: true,
    inject: async ({ ctx }) => (ctx.cassandraKill9 ? ctx.servers.killCassandra() : ctx.servers.stopCassandra()),
    heal: async (run) => {
      await run.ctx.servers.startCassandra();
      return `${run.ctx.cassandraKill9 ? 'kill -9' : 'SIGTERM'}, down ${seconds(run.f.durationMs)}, ready ${readyAfter(run)} s after its restart`;
    },
  }),
  'kafka-proxy-drop': throughProxy('kafka', 'drop', 'every worker connection to the broker cut, new ones refused for a while', 1.5, serverDown(500, 5_000)),
  'kafka-proxy-stall': throughProxy('kafka', 'stall', 'nothing forwarded to/from the broker for a while', 1, serverDown(2_000, 10_000)),
  'kafka-proxy-delay': throughProxy('kafka', 'delay', 'added latency on every worker connection to the broker', 1, delay),
  'temporal-proxy-drop': throughProxy('temporal', 'drop', 'every worker connection to Temporal cut, new ones refused for a while', 1.5, serverDown(500, 5_000)),
  'temporal-proxy-stall': throughProxy('temporal', 'stall', 'nothing forwarded to/from Temporal for a while', 1, serverDown(2_000, 10_000)),
  'temporal-proxy-delay': throughProxy('temporal', 'delay', 'added latency on every worker connection to Temporal', 1, delay),
} as const satisfies Record<string, FaultKind>;

export type FaultType = keyof typeof FAULT_KINDS;
export const FAULT_TYPES = Object.keys(FAULT_KINDS) as FaultType[];

/** A fault's descriptor. */
export const faultKind = (type: FaultType): FaultKind => FAULT_KINDS[type];

/** Carries out one planned fault by its kind's descriptor, recording it in `record`. */
export async function executeFault(f: PlannedFault, record: FaultRecord, ctx: FaultContext): Promise<void> {
  const k = faultKind(f.type);
  const mode = f.mode === undefined ? undefined : ctx.modes[f.mode];
  // Indices into ctx.modes (the group running), as the sampler knows them.
  const affected = f.mode !== undefined ? [f.mode] : ctx.modes.map((_, i) => i);
  try {
    let victim: ChaosWorker | undefined;
    if (k.victim) {
      const started = Date.now();
      const prefer = k.prefer;
      const pick = () => {
        if (prefer && Date.now() - started < PREFER_WAIT_MS) return mode!.pool.pickIdle(f.pick, (w) => prefer(ctx, w));
        return mode!.pool.pickIdle(f.pick);
      };
      victim = pick();
      while (!victim && Date.now() - started < 60_000) {
        await sleep(500);
        victim = pick();
      }
      if (!victim) {
        record.skipped = true;
        record.note = 'no idle worker within 60 s';
        return;
      }
      if (prefer && !prefer(ctx, victim)) ctx.event(`fault #${f.index} ${f.type}: no idle worker it prefers within ${PREFER_WAIT_MS / 1000} s, took ${victim.name}`);
      victim.busy = true;
      record.target = `${victim.name} (pid ${victim.child.pid})`;
    }
    record.startedS = ctx.rel();
    const run: FaultRun = { f, record, ctx, mode, victim };
    let back: (() => void) | undefined;
    if (k.outage) {
      const out: Server = k.target === 'workers' ? ownerOf(mode!.spec) : k.target;
      const at = Date.now();
      const end = ctx.outages.begin(out, at);
      if (k.outage === 'session-timeout') end(at + ctx.sessionTimeoutMs);
      else back = () => end();
    }
    const held = await k.inject(run);
    if (f.durationMs > 0) await sleep(f.durationMs);
    record.note = await k.heal(run, held);
    back?.();
    record.healedS = ctx.rel();
    ctx.sampler.watchRecovery(record, affected);
  } catch (err) {
    record.error = (err as Error).message.split('\n')[0];
    ctx.event(`fault #${f.index} ${f.type} failed: ${(err as Error).message}`);
  }
}
