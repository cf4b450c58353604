// Two projects: `unit` (pure, in-memory, fast) and `integration` (real Kafka, Temporal and
// Cassandra, started once per run by test/support/global-setup.ts when not already up, and
// stopped by test/support/global-teardown.ts when the run ends unless KFT_TEST_KEEP_INFRA=1).
//
// Files run one at a time by default (`maxWorkers: 1`), the CI's setting. They can run side by side
// (`npx jest --maxWorkers=3`: `npm test` in ≈ 500 s instead of ≈ 900 s on 2 cores): every
// integration file is isolated for it (its own topics, groups, flows, keyspaces and state
// directories, unique names; a private server of its own for a test that stops or freezes one).
// But three files on 2 cores saturate them, and every fresh-clone run that way found another test
// whose time bound or timing assumption did not hold (status within 5 s, a unit test's timer
// window, …): one at a time stays the default until those bounds are load-proof. The known long
// files start first (test/support/sequencer.js).
const transform = { '^.+\\.tsx?$': ['@swc/jest'] };
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  reporters: ['default', '<rootDir>/test/support/totals-reporter.js'],
  maxWorkers: 1,
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/integration-setup.ts'],
    },
  ],
};
