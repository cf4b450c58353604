import { FAULT_KINDS, FAULT_TYPES, type FaultType } from '../../../chaos/faults';
import { countByType, faultTarget, onlyWeights, planFaults, prng, splitPlan } from '../../../chaos/schedule';

const onWorkers = (t: FaultType) => FAULT_KINDS[t].target === 'workers';

const base = { seed: 42, faults: 120, phaseMs: 600_000, modes: 3, cassandra: true, sessionTimeoutMs: 6000 };

describe('chaos schedule', () => {
  test('prng: same seed, same sequence; in [0, 1)', () => {
    const a = prng(7);
    const b = prng(7);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(new Set(xs).size).toBeGreaterThan(990);
    expect(prng(8)()).not.toBe(prng(7)());
  });

  test('a seed gives one schedule; another seed another', () => {
    expect(planFaults(base)).toEqual(planFaults(base));
    expect(planFaults({ ...base, seed: 43 })).not.toEqual(planFaults(base));
  });

  test('the requested number of faults, in time order, spread over the phase, every type present', () => {
    const plan = planFaults(base);
    expect(plan).toHaveLength(120);
    for (let i = 1; i < plan.length; i++) expect(plan[i]!.at).toBeGreaterThanOrEqual(plan[i - 1]!.at);
    expect(plan[plan.length - 1]!.at).toBeGreaterThan(base.phaseMs * 0.7);
    expect(plan[plan.length - 1]!.at).toBeLessThan(base.phaseMs * 1.3);
    const counts = countByType(plan);
    for (const t of FAULT_TYPES) expect(counts[t]).toBeGreaterThan(0);
    expect(plan.map((f) => f.index)).toEqual(plan.map((_, i) => i));
  });

  test('quick: 30 faults; without Cassandra no cassandra restart', () => {
    const plan = planFaults({ ...base, faults: 30, phaseMs: 90_000, cassandra: false });
    expect(plan).toHaveLength(30);
    expect(countByType(plan)['cassandra-restart']).toBe(0);
    expect(new Set(plan.map((f) => f.type)).size).toBe(FAULT_TYPES.length - 1);
  });

  test('fault parameters: SIGSTOP outlasts the session timeout; worker faults name a mode; targets', () => {
    const plan = planFaults(base);
    for (const f of plan) {
      expect(f.pick).toBeGreaterThanOrEqual(0);
      expect(f.pick).toBeLessThan(1);
      if (f.type === 'worker-sigstop') expect(f.durationMs).toBeGreaterThan(base.sessionTimeoutMs);
      if (onWorkers(f.type)) {
        expect(f.mode).toBeGreaterThanOrEqual(0);
        expect(f.mode).toBeLessThan(3);
        expect(faultTarget(f)).toBe(`workers-${f.mode}`);
      } else expect(f.mode).toBeUndefined();
      if (f.type.endsWith('-delay')) expect(f.delayMs).toBeGreaterThan(0);
      if (f.type === 'worker-burst') expect(f.size).toBeGreaterThanOrEqual(1);
      if (f.type === 'worker-kafka-cut' || f.type === 'worker-temporal-cut') expect(f.durationMs).toBeGreaterThanOrEqual(2_000);
      if (!onWorkers(f.type)) expect(faultTarget(f)).toBe(FAULT_KINDS[f.type].target);
      if (f.type === 'kafka-kill9' || f.type === 'kafka-proxy-stall') expect(faultTarget(f)).toBe('kafka');
      if (f.type === 'temporal-restart' || f.type === 'temporal-proxy-drop') expect(faultTarget(f)).toBe('temporal');
    }
  });

  test('every kind is in the table with a target and a weight; the table is the list of types', () => {
    expect(FAULT_TYPES).toEqual(Object.keys(FAULT_KINDS));
    for (const t of FAULT_TYPES) {
      expect(FAULT_KINDS[t].weight).toBeGreaterThan(0);
      expect(FAULT_KINDS[t].about).not.toBe('');
    }
  });

  test("the descriptors: a victim and an owner's outage only on workers, a restart only on a server, Cassandra's kinds only on Cassandra", () => {
    for (const t of FAULT_TYPES) {
      const k = FAULT_KINDS[t];
      if (k.victim) expect(k.target).toBe('workers');
      if (k.restart) expect(k.target).not.toBe('workers');
      if (k.restart) expect(k.outage).toBe('until-healed');
      if (k.outage === 'session-timeout') expect(k.victim).toBe(true);
      if (k.modes === 'cassandra') expect(k.target).toBe('cassandra');
    }
    // The schedule's order and kinds, as the seeds of earlier runs planned them.
    expect(FAULT_TYPES.filter(onWorkers)).toEqual(['worker-kill9', 'worker-sigstop', 'worker-restart', 'worker-burst', 'worker-kafka-cut', 'worker-commit-cut', 'worker-temporal-cut']);
    expect(FAULT_TYPES.filter((t) => FAULT_KINDS[t].restart)).toEqual(['kafka-kill9', 'temporal-restart', 'cassandra-restart']);
    expect(FAULT_TYPES.filter((t) => FAULT_KINDS[t].modes === 'cassandra')).toEqual(['cassandra-restart']);
    expect(FAULT_TYPES.filter((t) => FAULT_KINDS[t].outage === 'session-timeout')).toEqual(['worker-kill9', 'worker-sigstop']);
    expect(FAULT_TYPES.filter((t) => !FAULT_KINDS[t].outage)).toEqual(['worker-restart', 'worker-burst', 'worker-commit-cut', 'kafka-proxy-delay', 'temporal-proxy-delay']);
  });

  test('weights: a zero weight removes a type', () => {
    const plan = planFaults({ ...base, weights: { 'kafka-kill9': 0 } });
    expect(countByType(plan)['kafka-kill9']).toBe(0);
    expect(() => planFaults({ ...base, faults: -1 })).toThrow();
  });

  test('--faults-only: only the kinds named, each at its own weight; an unknown kind is an error', () => {
    expect(onlyWeights(undefined)).toBeUndefined();
    const plan = planFaults({ ...base, weights: onlyWeights(['worker-commit-cut', 'worker-kill9']) });
    const byType = countByType(plan);
    expect(byType['worker-commit-cut'] + byType['worker-kill9']).toBe(base.faults);
    expect(byType['worker-commit-cut']).toBeGreaterThan(0);
    expect(byType['worker-kill9']).toBeGreaterThan(byType['worker-commit-cut']); // weight 4 against 2
    expect(() => onlyWeights(['worker-kil9'])).toThrow(/unknown fault kind worker-kil9/);
  });
});

describe('chaos schedule split (modes one after the other)', () => {
  test('worker faults go to their mode, Cassandra restarts to the Cassandra group, nothing lost, spread over the phase', () => {
    const plan = planFaults({ ...base, faults: 30, phaseMs: 90_000 });
    const split = splitPlan(plan, 3, 30_000, 2);
    expect(split.flat()).toHaveLength(30);
    expect(countByType(split.flat())).toEqual(countByType(plan));
    for (const group of split) {
      group.forEach((f, i) => {
        expect(f.index).toBe(i);
        expect(f.at).toBeGreaterThanOrEqual(0);
        expect(f.at).toBeLessThan(30_000);
        if (onWorkers(f.type)) expect(f.mode).toBe(0);
      });
    }
    expect(split[0]!.concat(split[1]!).some((f) => f.type === 'cassandra-restart')).toBe(false);
    const workerFaultsOfMode1 = plan.filter((f) => f.mode === 1).length;
    expect(split[1]!.filter((f) => onWorkers(f.type))).toHaveLength(workerFaultsOfMode1);
  });
});
