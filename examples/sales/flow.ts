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

// Names come from the environment so tests can run the example on fresh topics.
export const topic = process.env.SALES_TOPIC ?? 'sales-orders';

export default defineFlow<StoreTotals, Order>({
  name: process.env.SALES_FLOW ?? 'sales',
  groupId: process.env.SALES_GROUP ?? 'sales-totals',
  topics: [topic],
  fold: (totals, { value }) => ({
    orders: (totals?.orders ?? 0) + 1,
    amountCents: (totals?.amountCents ?? 0) + value.amountCents,
    lastOrderId: value.orderId,
  }),
  persistence: { backend: 'kafka', transactional: true },
  timers: { persistPeriodically: { fireEvery: '1s', persistEvery: process.env.SALES_PERSIST_EVERY ?? '10s', flushOnRevoke: true } },
});
