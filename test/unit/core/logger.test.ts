import pino from 'pino';
import { withoutBoundFields } from '../../../core/logger';

// A backend names `flow` in its lines; the worker's logger binds it already: one key per line.
function capture(): { log: pino.Logger; lines: () => Array<Record<string, unknown>>; raw: () => string[] } {
  const out: string[] = [];
  const log = pino({ base: undefined, timestamp: false }, { write: (s: string) => void out.push(s) }).child({ flow: 'orders' });
  return { log, lines: () => out.map((l) => JSON.parse(l)), raw: () => out };
}

test('a field equal to its bound value is left out: the line has the key once', () => {
  const c = capture();
  withoutBoundFields(c.log, { flow: 'orders' }).info({ flow: 'orders', topic: 't', partition: 3 }, 'snapshot topic ready');
  expect(c.raw()[0]!.match(/"flow"/g)).toHaveLength(1);
  expect(c.lines()[0]).toMatchObject({ flow: 'orders', topic: 't', partition: 3, msg: 'snapshot topic ready' });
});

test('a field that differs from the bound value, other fields, plain messages and errors pass as they are', () => {
  const c = capture();
  const log = withoutBoundFields(c.log, { flow: 'orders' });
  log.warn({ flow: 'payments', partition: 1 }, 'other flow');
  log.error('plain');
  log.debug({ partition: 2 }, 'no flow field');
  const fields = { flow: 'orders', err: new Error('boom') };
  log.error(fields, 'with error');
  expect(fields.flow).toBe('orders'); // the caller's object is not changed
  const raw = c.raw();
  expect(raw[0]).toContain('"flow":"payments"');
  expect(c.lines().map((l) => l.msg)).toEqual(['other flow', 'plain', 'with error']); // debug is below pino's default level
  expect(raw[2]!.match(/"flow"/g)).toHaveLength(1);
  expect(c.lines()[2]).toMatchObject({ err: { message: 'boom' } });
});
