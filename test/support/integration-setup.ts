import { serversReady } from './servers-ready';

// Real servers: transactions, rebalances and worker start-up take seconds, not milliseconds.
jest.setTimeout(120_000);

// The run's servers come up while it goes on (global-setup.ts): wait for them before this file's
// own hooks and tests (a cold start fetches them first: minutes on a slow link).
beforeAll(() => serversReady(), 20 * 60_000);
