import { type ClientOptions, policies } from 'cassandra-driver';

/** First wait before reconnecting to a node that went down. */
export const RECONNECT_BASE_MS = 250;
/** Longest wait between reconnection attempts to a down node. */
export const RECONNECT_MAX_MS = 2_000;

/**
 * How the backend's own client reconnects to a node that went down: exponential from 250 ms,
 * capped at 2 s. cassandra-driver's default caps at 10 minutes (1, 2, 4, 8, 16, 32 s, …): after an
 * outage of 20 s the next attempt came 11 s after the node was back, and with one node (or every
 * replica down) every query failed until then — the chaos suite measured it as a stall after each
 * Cassandra restart. An attempt to a dead node is one TCP connect, so a short cap costs little.
 * `clientOptions.policies.reconnection` replaces it.
 */
export function defaultReconnectionPolicy(): policies.reconnection.ReconnectionPolicy {
  return new policies.reconnection.ExponentialReconnectionPolicy(RECONNECT_BASE_MS, RECONNECT_MAX_MS, false);
}

/** The options of the client a backend makes itself: the caller's, over our defaults. */
export function backendClientOptions(base: ClientOptions, extra: Partial<ClientOptions> | undefined): ClientOptions {
  return {
    ...base,
    ...extra,
    policies: { reconnection: defaultReconnectionPolicy(), ...extra?.policies },
  };
}
