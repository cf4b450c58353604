// Per-key timers (ctx.timers, onTimer) and stateTtl in the engine, on the in-memory backend: timers
// are set by a fold, fire at their time on their clock, are persisted with the key's state and come
// back with it, and a fold that fails takes its timer edits with it.
import { TimerError } from '../../../flow/errors';
import { type Fold, handleErrorWith, type OnTimer } from '../../../flow/fold';
import { TimerArgumentError } from '../../../flow/key-timers';
import type { PartitionFlowOptions } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { InMemoryBackend } from '../../../persistence/memory';
import { harness, TP } from './harness';

interface Session {
  orders: number;
  closed?: number;
}

const T0 = Date.parse('2020-03-01T00:00:00.000Z');

/** Messages with record timestamps: [key, value, timestamp ms] from `from`. */
function stamped(from: number, rows: Array<[string, string, number]>): InputMessage[] {
  return rows.map(([key, value, ts], i) => ({ offset: String(from + i), key: Buffer.from(key), value: Buffer.from(value), timestamp: String(ts) }));
}

/** A session window: each order moves the key's 'close' timer 30 s past the order (processing or event time). */
const sessionFold =
  (time: 'processing' | 'event'): Fold<Session, string> =>
  (s, r, ctx) => {
    if (r.value === 'cancel') {
      ctx.timers.cancel('close');
      return s;
    }
    if (r.value === 'bad-timer') ctx.timers.at(Number.NaN);
    if (r.value === 'boom') {
      ctx.timers.at(0, { name: 'never' });
      throw new Error('a failing fold');
    }
    const base = time === 'event' ? Number(r.timestamp) : Date.now();
    ctx.timers.at(base + 30_000, { name: 'close', time });
    return { orders: (s?.orders ?? 0) + 1 };
  };

/** Closes the session: emits a summary and deletes the key. */
const closeSession: OnTimer<Session> = (s, timer, ctx) => {
  ctx.emit({ topic: 'sessions', key: timer.key, value: { orders: s.orders, at: timer.at } });
  return undefined;
};

const withOutputs = (extra: Partial<PartitionFlowOptions<Session, string>>): Partial<PartitionFlowOptions<Session, string>> => ({
  outputs: { topics: new Set(['sessions']), encoder: { encode: (v) => Buffer.from(JSON.stringify(v)) } },
  ...extra,
});

describe('per-key timers', () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  test('a processing-time timer set by the fold fires onTimer at its time; the fire is persisted with its emits', async () => {
    const h = await harness<Session>({ fold: sessionFold('processing'), clock: undefined, extra: withOutputs({ onTimer: closeSession }) });
    h.clock.set(T0);
    await h.flow.handleBatch(stamped(0, [['store-1', 'order', T0], ['store-1', 'order', T0]]));
    await h.flow.persist(T0, 'idle');
    const written = h.backend.snapshots.entries(TP).get('store-1');
    expect(written).toEqual({ state: { orders: 2 }, offset: 1, timers: [{ name: 'close', at: T0 + 30_000, time: 'processing' }] });

    h.flow.triggerTimers(T0 + 29_999);
    expect(h.flow.stateOf('store-1')).toEqual({ orders: 2 });
    h.flow.triggerTimers(T0 + 30_000);
    expect(h.flow.stateOf('store-1')).toBeUndefined();
    await h.flow.persist(T0 + 30_000, 'shutdown');
    expect(h.backend.snapshots.entries(TP).has('store-1')).toBe(false);
    expect(h.backend.snapshots.markers(TP).get('store-1')).toBe(1);
    expect(h.backend.outputs.sent.map((o) => JSON.parse(String(o.value)))).toEqual([{ orders: 2, at: T0 + 30_000 }]);
    expect(String(h.backend.outputs.sent[0]!.headers?.['kafka-flow-source'])).toBe(`topic/0/timer:store-1:close:${T0 + 30_000}/0`);
  });

  test('timers come back with the key after a restart, and fire there; unfired, they are written back unchanged', async () => {
    const backend = new InMemoryBackend<Session, string>();
    const a = await harness<Session>({ fold: sessionFold('processing'), backend, extra: withOutputs({ onTimer: closeSession }) });
    await a.flow.handleBatch(stamped(0, [['k1', 'order', T0], ['k2', 'order', T0]]));
    await a.flow.persist(T0, 'shutdown');
    // Another owner, later: k1's timer is due at once, k2's was moved by a record the first owner never persisted.
    const b = await harness<Session>({ fold: sessionFold('processing'), backend, extra: withOutputs({ onTimer: closeSession }) });
    b.flow.triggerTimers(T0 + 30_000);
    expect(b.flow.stateOf('k1')).toBeUndefined();
    expect(b.flow.stateOf('k2')).toBeUndefined();
    await b.flow.persist(T0 + 30_000, 'shutdown');
    expect(backend.outputs.sent.map((o) => JSON.parse(String(o.value)))).toEqual([
      { orders: 1, at: T0 + 30_000 },
      { orders: 1, at: T0 + 30_000 },
    ]);
  });

  test('event time: a record whose timestamp passes a timer fires it before that record folds; allowedLateness holds it back', async () => {
    const h = await harness<Session>({ fold: sessionFold('event'), extra: withOutputs({ onTimer: closeSession, allowedLateness: 5_000 }) });
    await h.flow.handleBatch(stamped(0, [['a', 'order', T0], ['b', 'order', T0 + 10_000]]));
    // Watermark T0 + 5 s: nothing due. a's session closes at T0 + 30 s, once a record reaches T0 + 35 s.
    await h.flow.handleBatch(stamped(2, [['x', 'order', T0 + 34_999], ['a', 'order', T0 + 35_000]]));
    expect(h.flow.stateOf('a')).toEqual({ orders: 1 }); // closed, then a new session from the record at 35 s
    h.flow.triggerTimers(T0 + 10 * 60_000); // processing time does not fire event timers
    expect(h.flow.stateOf('b')).toEqual({ orders: 1 });
    await h.flow.persist(T0, 'shutdown');
    expect(h.backend.outputs.sent.map((o) => JSON.parse(String(o.value)))).toEqual([{ orders: 1, at: T0 + 30_000 }]);
  });

  test('cancel, replace by name; list shows the edits; a fold that throws takes its edits with it', async () => {
    const seen: string[][] = [];
    const fold: Fold<Session, string> = (s, r, ctx) => {
      if (r.value === 'two') {
        ctx.timers.at(T0 + 1000, { name: 'x' });
        ctx.timers.at(T0 + 2000, { name: 'x' });
        ctx.timers.at(T0 + 500);
      }
      if (r.value === 'cancel') ctx.timers.cancel('x');
      seen.push(ctx.timers.list().map((t) => `${t.name}@${t.at - T0}`));
      return sessionFold('processing')(s, r, ctx) as Session;
    };
    const h = await harness<Session>({ fold, extra: { onFoldFailure: 'skip', onTimer: (s) => s } });
    await h.flow.handleBatch(stamped(0, [['k', 'two', T0], ['k', 'boom', T0], ['k', 'cancel', T0]]));
    expect(seen.map((names) => names.sort())).toEqual([
      ['x@2000', `${T0 + 500}@500`].sort(),
      ['close@30000', 'x@2000', `${T0 + 500}@500`].sort(),
      ['close@30000', `${T0 + 500}@500`].sort(),
    ]);
    await h.flow.persist(T0, 'shutdown');
    const timers = h.backend.snapshots.entries(TP).get('k')!.timers!.map((t) => t.name);
    // 'x' and 'close' cancelled by the last record; 'never' from the failed fold never set.
    expect(timers).toEqual([String(T0 + 500)]);
  });

  test('bad timer arguments fail the record (the fold-failure policy applies), with a typed error', async () => {
    const h = await harness<Session>({ fold: sessionFold('processing'), extra: { onTimer: (s) => s } });
    expect(() => h.flow.handleBatch(stamped(0, [['k', 'bad-timer', T0]]))).toThrow(expect.objectContaining({ code: 'FOLD_FAILED' }));
    const cause = (h.flow.failed as Error & { cause: { original?: unknown } }).cause;
    expect(cause).toBeInstanceOf(TimerArgumentError);
  });

  test('onTimer that throws stops the partition with TimerError; the timer is still pending in the store', async () => {
    const backend = new InMemoryBackend<Session, string>();
    const failing: OnTimer<Session> = () => {
      throw new Error('bad onTimer');
    };
    const h = await harness<Session>({ fold: sessionFold('processing'), backend, extra: { onTimer: failing } });
    await h.flow.handleBatch(stamped(0, [['k', 'order', T0]]));
    await h.flow.persist(T0, 'shutdown');
    expect(() => h.flow.triggerTimers(T0 + 30_000)).toThrow(TimerError);
    expect(backend.snapshots.entries(TP).get('k')!.timers).toEqual([{ name: 'close', at: T0 + 30_000, time: 'processing' }]);
  });

  test('a busy key whose queued records move its timer past the fire that came for it keeps the timer: it fires when reached', async () => {
    const fired: number[] = [];
    // Key c folds asynchronously; each record moves its timer p to 3 s past the record.
    const fold: Fold<Session, string> = (s, r, ctx) => {
      const next = () => {
        ctx.timers.at(Number(r.timestamp) + 3_000, { name: 'p', time: 'event' });
        return { orders: (s?.orders ?? 0) + 1 };
      };
      return r.key === 'c' ? Promise.resolve().then(next) : next();
    };
    const h = await harness<Session>({
      fold,
      extra: {
        onTimer: (s, t) => {
          if (t.key === 'c') fired.push(t.at);
          return s;
        },
      },
    });
    await h.flow.handleBatch(stamped(0, [['c', 'o', T0]])); // c's p at T0 + 3 s
    // c is busy with its two records while x's timestamp passes the p it had (T0 + 3 s): that fire
    // waits in c's queue, behind records that move p to T0 + 5 s — so it is not due any more.
    await h.flow.handleBatch(stamped(1, [['c', 'o', T0 + 1_000], ['c', 'o', T0 + 2_000], ['x', 'o', T0 + 3_500]]));
    expect(fired).toEqual([]);
    await h.flow.handleBatch(stamped(4, [['y', 'o', T0 + 5_000]]));
    expect(fired).toEqual([T0 + 5_000]);
  });

  test('handleErrorWith holds a failed inner fold\'s timer edits and makes a successful one\'s', async () => {
    const inner: Fold<Session, string> = (s, r, ctx) => {
      ctx.timers.at(T0 + 1, { name: r.value });
      if (r.value === 'fail') throw new Error('inner');
      return s ?? { orders: 0 };
    };
    const fold = handleErrorWith<Session, string>(inner, (s, _e, _r, ctx) => {
      expect(ctx.timers.list().map((t) => t.name)).toEqual(['ok']);
      return s;
    });
    const h = await harness<Session>({ fold, extra: { onTimer: (s) => s } });
    await h.flow.handleBatch(stamped(0, [['k', 'ok', T0], ['k', 'fail', T0]]));
    await h.flow.persist(T0, 'shutdown');
    expect(h.backend.snapshots.entries(TP).get('k')!.timers!.map((t) => t.name)).toEqual(['ok']);
  });
});

describe('stateTtl', () => {
  test('processing time: a key expires ttl after its last record, deleted as a fold returning undefined deletes it', async () => {
    const h = await harness<Session>({ fold: (s) => ({ orders: (s?.orders ?? 0) + 1 }), extra: { stateTtl: { ms: 60_000, time: 'processing' } } });
    h.clock.set(T0);
    await h.flow.handleBatch(stamped(0, [['k', 'o', T0]]));
    await h.flow.persist(T0, 'idle');
    expect(h.backend.snapshots.entries(TP).get('k')!.timers).toEqual([{ name: 'kafka-flow:ttl', at: T0 + 60_000, time: 'processing' }]);
    h.clock.set(T0 + 50_000);
    await h.flow.handleBatch(stamped(1, [['k', 'o', T0]])); // moves the expiry to T0 + 110 s
    h.flow.triggerTimers(T0 + 100_000);
    expect(h.flow.stateOf('k')).toEqual({ orders: 2 });
    h.flow.triggerTimers(T0 + 110_000);
    expect(h.flow.stateOf('k')).toBeUndefined();
    const fired = await h.metrics.timersFired.get();
    expect(fired.values).toEqual([{ labels: { flow: 'test', topic: TP.topic, partition: '0', kind: 'ttl' }, value: 1 }]);
    await h.flow.persist(T0 + 110_000, 'shutdown');
    expect(h.backend.snapshots.markers(TP).get('k')).toBe(1);
  });

  test('event time: the expiry follows the record timestamps; the reserved timer is not listed to the fold', async () => {
    const listed: number[] = [];
    const h = await harness<Session>({
      fold: (s, _r, ctx) => {
        listed.push(ctx.timers.list().length);
        return { orders: (s?.orders ?? 0) + 1 };
      },
      extra: { stateTtl: { ms: 60_000, time: 'event' } },
    });
    await h.flow.handleBatch(stamped(0, [['k', 'o', T0], ['other', 'o', T0 + 59_999]]));
    expect(h.flow.stateOf('k')).toEqual({ orders: 1 });
    await h.flow.handleBatch(stamped(2, [['other', 'o', T0 + 60_000]]));
    expect(h.flow.stateOf('k')).toBeUndefined();
    expect(listed).toEqual([0, 0, 0]);
  });
});
