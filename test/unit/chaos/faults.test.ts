// Carrying out a planned fault by its kind's descriptor (chaos/faults.ts), on fakes of what faults
// act on: the victim picked and held busy, inject, the fault's duration, heal, the outage it marks
// (until healed, or the session timeout from its start), the note and times the fault log keeps.
import type { FaultRecord } from '../../../chaos/fault-log';
import { executeFault, type FaultContext, type FaultType, type PlannedFault } from '../../../chaos/faults';
import type { Mode } from '../../../chaos/modes';
import { Outages } from '../../../chaos/outages';
import type { ChaosWorker } from '../../../chaos/workers';

function fakeContext(workers: Array<Partial<ChaosWorker>> = []) {
  const calls: string[] = [];
  const outages = new Outages();
  const watched: Array<{ record: FaultRecord; modes: number[] }> = [];
  const pool = {
    pickIdle: () => workers.find((w) => !w.busy) as ChaosWorker | undefined,
    kill9: async (w: ChaosWorker) => void calls.push(`kill9 ${w.name}`),
    start: () => {
      calls.push('start');
      return { name: 'w-new' } as ChaosWorker;
    },
  };
  const proxy = (server: string) => ({
    setMode: (mode: string, delayMs?: number) => void calls.push(`${server} ${mode}${delayMs ? ` ${delayMs}` : ''}`),
    cut: (pid: number) => {
      calls.push(`${server} cut ${pid}`);
      return 3;
    },
    uncut: (pid: number) => void calls.push(`${server} uncut ${pid}`),
  });
  const ctx = {
    modes: [{ spec: { id: 'kafka', backend: 'kafka', local: false }, pool } as unknown as Mode],
    servers: {},
    proxies: { kafka: proxy('kafka'), temporal: proxy('temporal') },
    sampler: { watchRecovery: (record: FaultRecord, modes: number[]) => void watched.push({ record, modes }) },
    outages,
    event: (line: string) => void calls.push(`event ${line}`),
    rel: () => 12.5,
    sessionTimeoutMs: 6_000,
    graceMs: 1_000,
    cassandraKill9: false,
  } as unknown as FaultContext;
  return { ctx, calls, outages, watched };
}

const planned = (type: FaultType, o: Partial<PlannedFault> = {}): PlannedFault => ({ index: 0, at: 0, type, durationMs: 30, pick: 0, ...o });
const record = (type: FaultType): FaultRecord => ({ index: 0, type, plannedS: 12 });

describe('executeFault', () => {
  test('a proxy fault: injected, lasts its duration, healed; its server out meanwhile; every mode watched for recovery', async () => {
    const { ctx, calls, outages, watched } = fakeContext();
    const r = record('kafka-proxy-stall');
    const t0 = Date.now();
    await executeFault(planned('kafka-proxy-stall'), r, ctx);
    expect(calls).toEqual(['kafka stall', 'kafka pass']);
    expect(r).toMatchObject({ startedS: 12.5, healedS: 12.5, note: 'stall 0.0 s' });
    expect(outages.downMs(['kafka'], t0, Date.now())).toBeGreaterThanOrEqual(25);
    expect(outages.list(0).every((o) => o.toS !== undefined)).toBe(true);
    expect(watched).toEqual([{ record: r, modes: [0] }]);
  });

  test('a delay slows the workers down but puts nothing out', async () => {
    const { ctx, calls, outages } = fakeContext();
    const r = record('temporal-proxy-delay');
    await executeFault(planned('temporal-proxy-delay', { delayMs: 700 }), r, ctx);
    expect(calls).toEqual(['temporal delay 700', 'temporal pass']);
    expect(r.note).toBe('delay 0.0 s (+700 ms)');
    expect(outages.list(0)).toEqual([]);
  });

  test("a worker cut off: the idle victim held busy while cut, its mode's owner out until healed", async () => {
    const victim: Partial<ChaosWorker> = { name: 'w1', busy: false, child: { pid: 4242 } as ChaosWorker['child'] };
    const { ctx, calls, outages } = fakeContext([victim]);
    const r = record('worker-kafka-cut');
    const running = executeFault(planned('worker-kafka-cut', { mode: 0 }), r, ctx);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(victim.busy).toBe(true);
    await running;
    expect(victim.busy).toBe(false);
    expect(calls).toEqual(['kafka cut 4242', 'kafka uncut 4242']);
    expect(r).toMatchObject({ target: 'w1 (pid 4242)', note: 'kafka cut off 0.0 s (3 connections open at the cut)' });
    expect(outages.list(0).map((o) => o.server)).toEqual(['owner:kafka']);
  });

  test("kill -9: the owner out for the session timeout from the kill, a replacement started", async () => {
    const victim: Partial<ChaosWorker> = { name: 'w1', busy: false, stateDir: undefined, child: { pid: 7 } as ChaosWorker['child'] };
    const { ctx, calls, outages } = fakeContext([victim]);
    const r = record('worker-kill9');
    await executeFault(planned('worker-kill9', { mode: 0, durationMs: 0 }), r, ctx);
    expect(calls).toEqual(['kill9 w1', 'start']);
    expect(r.note).toBe('replaced by w-new');
    const [out] = outages.list(0);
    expect(out!.server).toBe('owner:kafka');
    expect((out!.toS! - out!.fromS) * 1000).toBeCloseTo(6_000, 0);
    expect(victim.busy).toBe(true); // it is gone: never picked again
  }, 10_000);

  test('a failing heal is recorded as the fault\'s error and said, and the run goes on', async () => {
    const { ctx, calls } = fakeContext();
    (ctx.proxies.temporal as unknown as { setMode: (m: string) => void }).setMode = (m: string) => {
      if (m === 'pass') throw new Error('proxy gone\nmore');
    };
    const r = record('temporal-proxy-drop');
    await executeFault(planned('temporal-proxy-drop'), r, ctx);
    expect(r.error).toBe('proxy gone');
    expect(r.healedS).toBeUndefined();
    expect(calls).toEqual(['event fault #0 temporal-proxy-drop failed: proxy gone\nmore']);
  });
});
