import { Outages, recoveryFigures } from '../../../chaos/outages';

describe('Outages (chaos suite: time a server was out, left out of the stall figure)', () => {
  test('counts only the servers asked for, clipped to the window', () => {
    const o = new Outages();
    o.begin('kafka', 100)(200);
    o.begin('cassandra', 300)(400);
    expect(o.downMs(['kafka', 'temporal'], 0, 1000)).toBe(100);
    expect(o.downMs(['kafka', 'temporal', 'cassandra'], 0, 1000)).toBe(200);
    expect(o.downMs(['kafka'], 150, 1000)).toBe(50);
    expect(o.downMs(['kafka'], 0, 120)).toBe(20);
    expect(o.downMs(['temporal'], 0, 1000)).toBe(0);
  });

  test('overlapping outages count once; one still going counts up to the end of the window', () => {
    const o = new Outages();
    o.begin('kafka', 100)(300);
    o.begin('temporal', 200)(400);
    o.begin('temporal', 250)(260); // inside both
    o.begin('cassandra', 900); // not back yet
    expect(o.downMs(['kafka', 'temporal'], 0, 1000)).toBe(300);
    expect(o.downMs(['kafka', 'temporal', 'cassandra'], 0, 1000)).toBe(400);
    expect(o.downMs(['cassandra'], 0, 950)).toBe(50);
  });

  test('ending twice keeps the first end', () => {
    const o = new Outages();
    const back = o.begin('kafka', 0);
    back(10);
    back(50);
    expect(o.downMs(['kafka'], 0, 100)).toBe(10);
    expect(o.list(0)).toEqual([{ server: 'kafka', fromS: 0, toS: 0.01 }]);
  });

  test("a fault's recovery leaves out the outages after its heal that its modes need (a later fault's), and keeps the wall clock", () => {
    const o = new Outages();
    o.begin('kafka', 500)(1_000); // the fault itself, healed at 1,000 ms: before the heal, not counted
    o.begin('kafka', 3_000)(8_000); // a later broker kill
    o.begin('owner:kafka', 6_000)(9_000); // a later worker kill, overlapping it: counted once
    o.begin('owner:cassandra', 10_000)(15_000); // another mode's owner: not this recovery's
    o.begin('temporal', 19_000); // still out at the progress: up to it
    const servers = ['kafka', 'temporal', 'owner:kafka'] as const;
    // 20 s after its start the partitions progressed: 19 s after the heal, 6 s + 1 s of it outages.
    expect(recoveryFigures(o, servers, 1_000, 20_000)).toEqual({ recoveryS: 12, wallS: 19 });
    expect(recoveryFigures(o, ['cassandra'], 1_000, 20_000)).toEqual({ recoveryS: 19, wallS: 19 });
    // Progress seen before the heal's sample counts as no time, never negative.
    expect(recoveryFigures(o, servers, 1_000, 900)).toEqual({ recoveryS: 0, wallS: 0 });
  });
});
