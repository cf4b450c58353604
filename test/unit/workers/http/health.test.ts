import { cachedProbe, type ReadinessChecks, readiness } from '../../../../workers/http/health';

const checks = (o: Partial<{ kafka: boolean; temporal: boolean; partitions: ReturnType<ReadinessChecks['partitions']> }>): ReadinessChecks => ({
  partitions: () => ('partitions' in o ? o.partitions : { joined: true, assigned: 2, notReady: [] }),
  kafkaReachable: async () => o.kafka ?? true,
  temporalReachable: async () => o.temporal ?? true,
});

const body = async (c: ReadinessChecks) => {
  const r = await readiness(c);
  return { status: r.status, ...JSON.parse(r.body) };
};

describe('/readyz', () => {
  test('200 when joined, every assigned partition folds, Kafka and Temporal answer', async () => {
    expect(await body(checks({}))).toEqual({ status: 200, ready: true, assigned: 2, folding: 2 });
  });

  test('503 naming what is not ready', async () => {
    expect(await body(checks({ partitions: undefined }))).toEqual({ status: 503, ready: false, notReady: ['worker: starting'] });
    expect(await body(checks({ partitions: { joined: false, assigned: 0, notReady: [] } }))).toEqual({ status: 503, ready: false, notReady: ['group: not joined'] });
    expect(
      await body(checks({ kafka: false, temporal: false, partitions: { joined: true, assigned: 3, notReady: [{ topic: 't', partition: 1, state: 'assigned' }, { topic: 't', partition: 2, state: 'failed' }] } })),
    ).toEqual({
      status: 503,
      ready: false,
      assigned: 3,
      folding: 1,
      notReady: ['kafka: no broker accepts a connection', 'temporal: the frontend does not answer', 'partitions not folding: t-1 (assigned), t-2 (failed)'],
    });
  });

  test('names at most 10 partitions, counts the rest', async () => {
    const notReady = Array.from({ length: 13 }, (_, partition) => ({ topic: 't', partition, state: 'assigned' }));
    const b = await body(checks({ partitions: { joined: true, assigned: 13, notReady } }));
    expect(b.notReady[0]).toMatch(/t-9 \(assigned\) and 3 more$/);
  });
});

describe('cachedProbe', () => {
  test('runs the probe at most once per maxAge, shares the answer in flight, a throw is false', async () => {
    let now = 0;
    let calls = 0;
    const probe = cachedProbe(
      async () => {
        calls++;
        if (calls === 2) throw new Error('down');
        return true;
      },
      1000,
      () => now,
    );
    expect(await Promise.all([probe(), probe()])).toEqual([true, true]);
    expect(calls).toBe(1);
    now = 1000;
    expect(await probe()).toBe(false);
    now = 1500;
    expect(await probe()).toBe(false);
    now = 2000;
    expect(await probe()).toBe(true);
    expect(calls).toBe(3);
  });
});
