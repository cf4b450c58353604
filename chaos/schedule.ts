/**
 * The chaos suite's fault schedule: a pure function of a seed, so a failing run is replayed by
 * passing its seed again (`--seed`). Victims are picked at run time from the workers alive then,
 * with the fault's own random number (`pick`), so the same seed picks the same way when the same
 * workers are alive.
 */
/** What a fault acts on: two faults on one server never overlap; a mode's worker faults may. */
export type FaultTarget = 'workers' | 'kafka' | 'temporal' | 'cassandra';

/** How a fault is planned: what it hits, how often (relative weight), and its parameters. */
export interface FaultKind {
  target: FaultTarget;
  weight: number;
  /** Its duration and other parameters, drawn in this order from the schedule's random numbers. */
  plan: (between: (lo: number, hi: number) => number, sessionTimeoutMs: number) => Pick<PlannedFault, 'durationMs' | 'delayMs' | 'size'>;
}

const none = () => ({ durationMs: 0 });
const serverDown = (lo: number, hi: number) => (between: (lo: number, hi: number) => number) => ({ durationMs: between(lo, hi) });
const delay = (between: (lo: number, hi: number) => number) => ({ durationMs: between(3_000, 12_000), delayMs: between(100, 1_500) });

/**
 * Every fault kind. Worker faults most, server restarts less, network faults in between. A
 * `proxy` fault acts on every worker's connections through the server's proxy; a `cut` fault on
 * one worker's connections only (the others keep theirs).
 */
export const FAULT_KINDS = {
  /** kill -9 of a worker, and a replacement started */
  'worker-kill9': { target: 'workers', weight: 4, plan: none },
  /** SIGSTOP past the consumer session timeout, then SIGCONT: a real stale owner */
  'worker-sigstop': { target: 'workers', weight: 2, plan: (between, session) => ({ durationMs: session + between(2_000, 6_000) }) },
  /** SIGTERM (graceful stop), then a new worker */
  'worker-restart': { target: 'workers', weight: 3, plan: none },
  /** several workers join at once, and leave (SIGTERM) together later */
  'worker-burst': { target: 'workers', weight: 2, plan: (between) => ({ size: between(1, 3), durationMs: between(5_000, 15_000) }) },
  /** one worker's broker connections stalled (Temporal still reachable), from under to past the session timeout */
  'worker-kafka-cut': { target: 'workers', weight: 1.5, plan: (between, session) => ({ durationMs: between(2_000, session + 6_000) }) },
  /**
   * ambiguous commits: for a while, each of one worker's commits (EndTxn of its snapshot
   * transactions, or the consumer's OffsetCommit with Cassandra) reaches the broker and its
   * connection is then cut before the answer: the worker must learn what landed before writing again
   */
  'worker-commit-cut': { target: 'workers', weight: 2, plan: (between) => ({ durationMs: between(3_000, 12_000) }) },
  /** one worker's Temporal connections stalled (the broker still reachable) */
  'worker-temporal-cut': { target: 'workers', weight: 1.5, plan: (between) => ({ durationMs: between(2_000, 15_000) }) },
  /** kill -9 of the broker, restarted after a pause */
  'kafka-kill9': { target: 'kafka', weight: 1, plan: serverDown(1_000, 5_000) },
  /** the Temporal dev server stopped (SIGTERM) and started again */
  'temporal-restart': { target: 'temporal', weight: 1.5, plan: serverDown(500, 4_000) },
  /** Cassandra stopped (or kill -9) and started again */
  'cassandra-restart': { target: 'cassandra', weight: 1, plan: serverDown(1_000, 5_000) },
  /** every worker connection to the broker cut, new ones refused for a while */
  'kafka-proxy-drop': { target: 'kafka', weight: 1.5, plan: serverDown(500, 5_000) },
  /** nothing forwarded to/from the broker for a while */
  'kafka-proxy-stall': { target: 'kafka', weight: 1, plan: serverDown(2_000, 10_000) },
  /** added latency on every worker connection to the broker */
  'kafka-proxy-delay': { target: 'kafka', weight: 1, plan: delay },
  'temporal-proxy-drop': { target: 'temporal', weight: 1.5, plan: serverDown(500, 5_000) },
  'temporal-proxy-stall': { target: 'temporal', weight: 1, plan: serverDown(2_000, 10_000) },
  'temporal-proxy-delay': { target: 'temporal', weight: 1, plan: delay },
} as const satisfies Record<string, FaultKind>;

export type FaultType = keyof typeof FAULT_KINDS;
export const FAULT_TYPES = Object.keys(FAULT_KINDS) as FaultType[];

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

/** mulberry32: a small, fast, seeded PRNG; [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const DEFAULT_WEIGHTS = Object.fromEntries(FAULT_TYPES.map((t) => [t, FAULT_KINDS[t].weight])) as Record<FaultType, number>;

/** Weights that keep only `kinds` (undefined: every kind at its default weight); an unknown kind is an error. */
export function onlyWeights(kinds: readonly string[] | undefined): Partial<Record<FaultType, number>> | undefined {
  if (kinds === undefined) return undefined;
  for (const k of kinds) if (!(FAULT_TYPES as readonly string[]).includes(k)) throw new Error(`unknown fault kind ${k}: one of ${FAULT_TYPES.join(', ')}`);
  return Object.fromEntries(FAULT_TYPES.map((t) => [t, kinds.includes(t) ? DEFAULT_WEIGHTS[t] : 0])) as Record<FaultType, number>;
}

export interface ScheduleOptions {
  seed: number;
  faults: number;
  /** The fault phase: faults start spread over it (the last ones may run past it). */
  phaseMs: number;
  /** Number of persistence modes running (worker faults pick one). */
  modes: number;
  /** Whether Cassandra is used at all (else no cassandra-restart). */
  cassandra: boolean;
  sessionTimeoutMs: number;
  weights?: Partial<Record<FaultType, number>>;
}

export function planFaults(o: ScheduleOptions): PlannedFault[] {
  if (!Number.isInteger(o.faults) || o.faults < 0) throw new Error(`faults must be a non-negative integer, got ${o.faults}`);
  if (o.modes < 1) throw new Error('at least one mode');
  const rnd = prng(o.seed);
  const weights = { ...DEFAULT_WEIGHTS, ...o.weights };
  if (!o.cassandra) weights['cassandra-restart'] = 0;
  const types = FAULT_TYPES.filter((t) => weights[t] > 0);
  const total = types.reduce((a, t) => a + weights[t], 0);
  const between = (lo: number, hi: number) => Math.round(lo + rnd() * (hi - lo));
  const gap = o.faults > 0 ? o.phaseMs / o.faults : 0;
  // Every type at least once when there is room for it, the rest by weight; then shuffled.
  const chosen: FaultType[] = o.faults >= types.length ? [...types] : [];
  while (chosen.length < o.faults) {
    let r = rnd() * total;
    let type = types[types.length - 1]!;
    for (const t of types) {
      r -= weights[t];
      if (r < 0) {
        type = t;
        break;
      }
    }
    chosen.push(type);
  }
  for (let i = chosen.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [chosen[i], chosen[j]] = [chosen[j]!, chosen[i]!];
  }
  const out: PlannedFault[] = [];
  let at = 0;
  chosen.forEach((type, index) => {
    if (index > 0) at += Math.round(gap * (0.5 + rnd()));
    const f: PlannedFault = { index, at, type, durationMs: 0, pick: rnd() };
    const kind: FaultKind = FAULT_KINDS[type];
    Object.assign(f, kind.plan(between, o.sessionTimeoutMs));
    if (kind.target === 'workers') f.mode = Math.floor(rnd() * o.modes);
    out.push(f);
  });
  return out;
}

/** What a fault locks while it runs: two faults on one target never overlap. */
export function faultTarget(f: PlannedFault): string {
  const target = FAULT_KINDS[f.type].target;
  return target === 'workers' ? `workers-${f.mode}` : target;
}

export function countByType(faults: readonly { type: FaultType }[]): Record<FaultType, number> {
  const out = Object.fromEntries(FAULT_TYPES.map((t) => [t, 0])) as Record<FaultType, number>;
  for (const f of faults) out[f.type]++;
  return out;
}

/**
 * Splits one schedule (planned with `modes` = number of groups) into one schedule per group, for
 * running the modes one after the other: a worker fault goes to its mode's group (as mode 0
 * there), a Cassandra restart to the Cassandra group, any other server or network fault round
 * robin; each group's faults keep their order and are spread over `phaseMs`, with the same
 * relative gaps. Every type planned stays in the run.
 */
export function splitPlan(plan: readonly PlannedFault[], groups: number, phaseMs: number, cassandraGroup?: number): PlannedFault[][] {
  const out: PlannedFault[][] = Array.from({ length: groups }, () => []);
  let next = 0;
  for (const f of plan) {
    let g: number;
    if (f.mode !== undefined) g = f.mode % groups;
    else if (f.type === 'cassandra-restart' && cassandraGroup !== undefined) g = cassandraGroup;
    else g = next++ % groups;
    out[g]!.push({ ...f, mode: f.mode === undefined ? undefined : 0 });
  }
  return out.map((list) => {
    const n = list.length;
    return list.map((f, i) => ({ ...f, index: i, at: n <= 1 ? 0 : Math.round((i / n) * phaseMs) }));
  });
}
