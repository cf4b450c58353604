/** The example's order generator: deterministic, so a test can compute the expected totals. */
import type { Order } from './flow';

export const STORES = ['amsterdam', 'berlin', 'lisbon', 'madrid', 'oslo', 'paris', 'prague', 'rome', 'vienna', 'warsaw', 'zurich', 'dublin'];

export function order(i: number): Order {
  return { orderId: `o-${i}`, store: STORES[i % STORES.length]!, amountCents: 100 + ((i * 7919) % 10_000) };
}

/** What the flow's state must be after orders 0..n-1. */
export function expectedTotals(n: number): Map<string, { orders: number; amountCents: number; lastOrderId: string }> {
  const totals = new Map<string, { orders: number; amountCents: number; lastOrderId: string }>();
  for (let i = 0; i < n; i++) {
    const o = order(i);
    const t = totals.get(o.store) ?? { orders: 0, amountCents: 0, lastOrderId: '' };
    totals.set(o.store, { orders: t.orders + 1, amountCents: t.amountCents + o.amountCents, lastOrderId: o.orderId });
  }
  return totals;
}
