import { Outages } from '../../../chaos/outages';

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
});
