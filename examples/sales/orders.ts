/** The example's order generator: deterministic, so a test can compute the expected totals. */
import type { Order } from './flow';

export const STORES = ['amsterdam', 'berlin', 'lisbon', 'madrid', 'oslo', 'paris', 'prague', 'rome', 'vienna', 'warsaw', 'zurich', 'dublin'];

/**
 * Dublin orders in bursts: in each run of 20,000 orders (40 s at the example's 500 orders/s) only
 * the first 2,000 (4 s) go to it, the rest of its share to Zurich — so its sessions end (the flow emits
 * them to the sessions topic) while the other stores' never do.
 */
const BURSTY = 'dublin';
const CYCLE = 20_000;
const BURST = 2_000;

export function order(i: number): Order {
  let store = STORES[i % STORES.length]!;
  if (store === BURSTY && i % CYCLE >= BURST) store = 'zurich';
  return { orderId: `o-${i}`, store, amountCents: 100 + ((i * 7919) % 10_000) };
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
