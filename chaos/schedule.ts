/**
 * The chaos suite's fault schedule: a pure function of a seed, so a failing run is replayed by
 * passing its seed again (`--seed`). Victims are picked at run time from the workers alive then,
 * with the fault's own random number (`pick`), so the same seed picks the same way when the same
 * workers are alive.
 */
import { FAULT_KINDS, FAULT_TYPES, type FaultType, type PlannedFault } from './faults';

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
  /** Whether a Cassandra mode runs (else no kind for the Cassandra modes only: cassandra-restart). */
  cassandra: boolean;
  sessionTimeoutMs: number;
  weights?: Partial<Record<FaultType, number>>;
}

export function planFaults(o: ScheduleOptions): PlannedFault[] {
  if (!Number.isInteger(o.faults) || o.faults < 0) throw new Error(`faults must be a non-negative integer, got ${o.faults}`);
  if (o.modes < 1) throw new Error('at least one mode');
  const rnd = prng(o.seed);
  const weights = { ...DEFAULT_WEIGHTS, ...o.weights };
  // A kind for the Cassandra modes only is not planned when none runs.
  if (!o.cassandra) for (const t of FAULT_TYPES) if (FAULT_KINDS[t].modes === 'cassandra') weights[t] = 0;
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
    const kind = FAULT_KINDS[type];
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
 * there), a fault of a kind for the Cassandra modes only (a Cassandra restart) to the Cassandra
 * group, any other server or network fault round robin; each group's faults keep their order and are spread over `phaseMs`, with the same
 * relative gaps. Every type planned stays in the run.
 */
export function splitPlan(plan: readonly PlannedFault[], groups: number, phaseMs: number, cassandraGroup?: number): PlannedFault[][] {
  const out: PlannedFault[][] = Array.from({ length: groups }, () => []);
  let next = 0;
  for (const f of plan) {
    let g: number;
    if (f.mode !== undefined) g = f.mode % groups;
    else if (FAULT_KINDS[f.type].modes === 'cassandra' && cassandraGroup !== undefined) g = cassandraGroup;
    else g = next++ % groups;
    out[g]!.push({ ...f, mode: f.mode === undefined ? undefined : 0 });
  }
  return out.map((list) => {
    const n = list.length;
    return list.map((f, i) => ({ ...f, index: i, at: n <= 1 ? 0 : Math.round((i / n) * phaseMs) }));
  });
}
