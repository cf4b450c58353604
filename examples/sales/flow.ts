import { defineFlow } from '../../index';

/** Running totals per store, from a topic of orders keyed by store, and the store's open session. */
export interface StoreTotals {
  orders: number;
  /** In cents: integer sums stay exact. */
  amountCents: number;
  lastOrderId: string;
  /** The store's session: its orders since it was last quiet for SESSION_GAP_MS (record time). */
  session?: { orders: number; amountCents: number; from: number; to: number };
}

/** Emitted to the sessions topic when a store's session ends: SESSION_GAP_MS of record time without its orders. */
export interface SalesSession {
  store: string;
  orders: number;
  amountCents: number;
  /** The timestamps of its first and last order (ms). */
  from: number;
  to: number;
}

export interface Order {
  orderId: string;
  store: string;
  amountCents: number;
}

/** Emitted to the alerts topic each time a store's total crosses another multiple of ALERT_EVERY_CENTS. */
export interface SalesAlert {
  store: string;
  /** The multiple crossed. */
  crossedCents: number;
  totalCents: number;
  orderId: string;
}

/** $10,000: at the example's 500 orders/s, each store crosses one every few seconds. */
export const ALERT_EVERY_CENTS = 1_000_000;

// Names come from the environment so tests can run the example on fresh topics.
export const topic = process.env.SALES_TOPIC ?? 'sales-orders';
export const alertsTopic = process.env.SALES_ALERTS_TOPIC ?? 'sales-alerts';
export const sessionsTopic = process.env.SALES_SESSIONS_TOPIC ?? 'sales-sessions';
/** A store's session ends after this many ms (of record time) without its orders. */
export const SESSION_GAP_MS = Number(process.env.SALES_SESSION_GAP_MS ?? 30_000);

export default defineFlow<StoreTotals, Order>({
  name: process.env.SALES_FLOW ?? 'sales',
  groupId: process.env.SALES_GROUP ?? 'sales-totals',
  topics: [topic],
  outputTopics: [alertsTopic, sessionsTopic],
  fold: (totals, { value, timestamp }, ctx) => {
    const before = totals?.amountCents ?? 0;
    const after = before + value.amountCents;
    // Produced in the same transaction as this store's snapshot and the offset commit: a
    // read_committed consumer of the alerts sees each crossing exactly once.
    for (let k = Math.floor(before / ALERT_EVERY_CENTS) + 1; k <= Math.floor(after / ALERT_EVERY_CENTS); k++) {
      const alert: SalesAlert = { store: value.store, crossedCents: k * ALERT_EVERY_CENTS, totalCents: after, orderId: value.orderId };
      ctx.emit({ topic: alertsTopic, key: value.store, value: alert });
    }
    // The session's end moves with each order: a timer by event time, persisted with the state.
    const at = Number(timestamp);
    ctx.timers.at(at + SESSION_GAP_MS, { name: 'session-end', time: 'event' });
    const session = totals?.session;
    return {
      orders: (totals?.orders ?? 0) + 1,
      amountCents: after,
      lastOrderId: value.orderId,
      session: { orders: (session?.orders ?? 0) + 1, amountCents: (session?.amountCents ?? 0) + value.amountCents, from: session?.from ?? at, to: at },
    };
  },
  // The store was quiet for SESSION_GAP_MS: its session's summary goes out (exactly once, with the store's snapshot).
  onTimer: (totals, timer, ctx) => {
    const { session, ...rest } = totals;
    if (session) ctx.emit({ topic: sessionsTopic, key: timer.key, value: { store: timer.key, ...session } satisfies SalesSession });
    return rest;
  },
  persistence: { backend: 'kafka', transactional: true },
  timers: { persistPeriodically: { fireEvery: '1s', persistEvery: process.env.SALES_PERSIST_EVERY ?? '10s', flushOnRevoke: true } },
});
