import { json, Router } from '../../../../workers/http/router';

const router = () =>
  new Router()
    .get('/healthz', () => json(200, { alive: true }))
    .get('/flows/:flow/keys/:key', ({ params, query }) => json(200, { params, topic: query.get('topic') }))
    .get('/boom', () => {
      throw new TypeError('a message that may quote a key');
    });

describe('Router', () => {
  test('matches fixed paths and :name segments, URL-decoding each segment after the split', async () => {
    expect(await router().handle('GET', '/healthz')).toEqual({ status: 200, body: '{"alive":true}\n', contentType: 'application/json' });
    const r = await router().handle('GET', `/flows/sales/keys/${encodeURIComponent('a/b c?é')}?topic=orders`);
    expect(JSON.parse(r.body)).toEqual({ params: { flow: 'sales', key: 'a/b c?é' }, topic: 'orders' });
  });

  test('404 naming the routes for an unknown path, an empty segment or extra segments', async () => {
    for (const path of ['/nope', '/flows/sales/keys/', '/flows/sales/keys/a/b', '/healthz/x']) {
      const r = await router().handle('GET', path);
      expect(r.status).toBe(404);
      expect(JSON.parse(r.body).message).toContain('/healthz, /flows/:flow/keys/:key');
    }
  });

  test('405 for a method other than GET/HEAD; HEAD answers like GET', async () => {
    expect((await router().handle('POST', '/healthz')).status).toBe(405);
    expect((await router().handle('HEAD', '/healthz')).status).toBe(200);
  });

  test('400 for a segment that is not valid URL encoding', async () => {
    const r = await router().handle('GET', '/flows/sales/keys/%E0%A4%A');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toBe('BadRequest');
  });

  test("500 with the error's class only when a handler throws; the error goes to onError", async () => {
    const seen: unknown[] = [];
    const r = await new Router((err) => seen.push(err))
      .get('/boom', () => {
        throw new TypeError('a message that may quote a key');
      })
      .handle('GET', '/boom');
    expect(seen).toEqual([new TypeError('a message that may quote a key')]);
    expect(r.status).toBe(500);
    expect(r.body).not.toContain('quote');
    expect(JSON.parse(r.body).error).toBe('TypeError');
  });
});
