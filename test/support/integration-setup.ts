// Real servers: transactions, rebalances and worker start-up take seconds, not milliseconds.
jest.setTimeout(120_000);
