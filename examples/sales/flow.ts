import { defineFlow } from '../../index';

/** Running totals per store, from a topic of orders keyed by store. */
export interface StoreTotals {
  orders: number;
  /** In cents: integer sums stay exact. */
  amountCents: number;
  lastOrderId: string;
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

export default defineFlow<StoreTotals, Order>({
  name: process.env.SALES_FLOW ?? 'sales',
  groupId: process.env.SALES_GROUP ?? 'sales-totals',
  topics: [topic],
  outputTopics: [alertsTopic],
  fold: (totals, { value }, ctx) => {
    const before = totals?.amountCents ?? 0;
    const after = before + value.amountCents;
    // Produced in the same transaction as this store's snapshot and the offset commit: a
    // read_committed consumer of the alerts sees each crossing exactly once.
    for (let k = Math.floor(before / ALERT_EVERY_CENTS) + 1; k <= Math.floor(after / ALERT_EVERY_CENTS); k++) {
      const alert: SalesAlert = { store: value.store, crossedCents: k * ALERT_EVERY_CENTS, totalCents: after, orderId: value.orderId };
      ctx.emit({ topic: alertsTopic, key: value.store, value: alert });
    }
    return { orders: (totals?.orders ?? 0) + 1, amountCents: after, lastOrderId: value.orderId };
  },
  persistence: { backend: 'kafka', transactional: true },
  timers: { persistPeriodically: { fireEvery: '1s', persistEvery: process.env.SALES_PERSIST_EVERY ?? '10s', flushOnRevoke: true } },
});
