// The worker's routes: /healthz, the live state query's replies (200, 404 unknown key or flow, 400
// bad input, 409 not the owner here, 503 while starting) and `local=1` answering without forwarding.
import { Registry } from 'prom-client';
import type { KeyEndpoint } from '../../../../workers/http/worker-routes';
import { workerRouter } from '../../../../workers/http/worker-routes';
import type { KeySources, OwnerKeyAnswer } from '../../../../workers/keys/key-query';
import { NotOwnerHereError } from '../../../../workers/runtime/flow-runtime';

const answer = { source: 'owner', key: 'a/b', state: 1 } as unknown as OwnerKeyAnswer;
const sources: KeySources = {
  partitionCount: async () => 2,
  ownerOf: async () => ({ owner: { generation: 1, memberId: 'm', taskQueue: 'q', httpAddress: 'http://elsewhere:1' } }),
  askOwner: async (_o, _t, _p, key) => (key === 'a/b' ? answer : undefined),
  snapshot: async () => undefined,
};

function router(endpoint: KeyEndpoint | undefined) {
  return workerRouter({
    registry: new Registry(),
    readiness: { partitions: () => undefined, kafkaReachable: async () => true, temporalReachable: async () => true },
    keys: () => endpoint,
  });
}

const local: Array<[string, number, string]> = [];
const endpoint: KeyEndpoint = {
  flow: { name: 'sales', topics: ['orders'] },
  sources,
  answerLocally: async (topic, partition, key) => {
    local.push([topic, partition, key]);
    if (partition === 1) throw new NotOwnerHereError(topic, partition, 'assigned');
    return key === 'a/b' ? answer : undefined;
  },
};

/** `starting`: the worker has not started its flow yet (no key endpoint). */
const get = async (path: string, starting = false) => {
  const r = await router(starting ? undefined : endpoint).handle('GET', path);
  return { status: r.status, body: JSON.parse(r.body) };
};

describe('worker routes', () => {
  test('/healthz 200; /readyz 503 while starting; /metrics in the text format', async () => {
    expect(await get('/healthz')).toEqual({ status: 200, body: { alive: true } });
    expect(await get('/readyz')).toEqual({ status: 503, body: { ready: false, notReady: ['worker: starting'] } });
    const metrics = await router(endpoint).handle('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.contentType).toMatch(/^text\/plain/);
  });

  test('a key: the query\'s answer; unknown key 404; another flow 404; a bad partition 400; starting 503', async () => {
    expect(await get('/flows/sales/keys/a%2Fb')).toEqual({ status: 200, body: answer });
    expect(await get('/flows/sales/keys/nope')).toMatchObject({ status: 404, body: { error: 'KeyNotFoundError' } });
    expect(await get('/flows/other/keys/a%2Fb')).toMatchObject({ status: 404, body: { error: 'UnknownFlow' } });
    expect(await get('/flows/sales/keys/a%2Fb?partition=x')).toMatchObject({ status: 400, body: { error: 'KeyQueryError' } });
    expect(await get('/flows/sales/keys/a%2Fb?partition=9')).toMatchObject({ status: 400, body: { message: 'partition 9 is out of range: the topic has 2 partition(s)' } });
    expect(await get('/flows/sales/keys/a%2Fb', true)).toMatchObject({ status: 503, body: { error: 'Starting' } });
  });

  test('local=1: this process answers as the owner (never forwarded): 200, 404, 409 when it does not fold the partition', async () => {
    expect(await get('/flows/sales/keys/a%2Fb?topic=orders&partition=0&local=1')).toEqual({ status: 200, body: answer });
    expect(await get('/flows/sales/keys/nope?topic=orders&partition=0&local=1')).toMatchObject({ status: 404, body: { error: 'KeyNotFoundError' } });
    expect(await get('/flows/sales/keys/a%2Fb?topic=orders&partition=1&local=1')).toMatchObject({ status: 409, body: { error: 'NotOwnerHereError' } });
    expect(await get('/flows/sales/keys/a%2Fb?local=1')).toMatchObject({ status: 400 });
    expect(local).toEqual([
      ['orders', 0, 'a/b'],
      ['orders', 0, 'nope'],
      ['orders', 1, 'a/b'],
    ]);
  });

  test('/flows/:flow/standbys: the standby copies this worker keeps; another flow 404; starting 503', async () => {
    const copies = [{ topic: 'orders', partition: 1, checkpoint: '120', lag: 3 }];
    const withStandbys = (ready: boolean) =>
      workerRouter({
        registry: new Registry(),
        readiness: { partitions: () => undefined, kafkaReachable: async () => true, temporalReachable: async () => true },
        keys: () => endpoint,
        standbys: () => (ready ? { flow: 'sales', copies } : undefined),
      });
    const ask = async (path: string, ready = true) => {
      const r = await withStandbys(ready).handle('GET', path);
      return { status: r.status, body: JSON.parse(r.body) };
    };
    expect(await ask('/flows/sales/standbys')).toEqual({ status: 200, body: { standbys: copies } });
    expect(await ask('/flows/other/standbys')).toMatchObject({ status: 404, body: { error: 'UnknownFlow' } });
    expect(await ask('/flows/sales/standbys', false)).toMatchObject({ status: 503, body: { error: 'Starting' } });
  });
});
