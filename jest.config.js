// Two projects: `unit` (pure, in-memory, fast) and `integration` (real Kafka, Temporal and
// Cassandra, started once per run by test/support/global-setup.ts when not already up, and
// stopped by test/support/global-teardown.ts when the run ends unless KFT_TEST_KEEP_INFRA=1).
//
// Files run two at a time (`maxWorkers: 2`, the CI's setting: ≈ 650 s instead of ≈ 1,050 s one at
// a time on 2 cores): every integration file is isolated for it (its own topics, groups, flows,
// keyspaces and state directories, unique names; a private server of its own for a test that stops
// or freezes one). The known long files start first (test/support/sequencer.js), the quick chaos
// run before all, so it runs beside the rest instead of after it. Three at a time saturate 2 cores
// and found timing assumptions (docs/testing.md); `--maxWorkers=1` runs one at a time.
const transform = { '^.+\\.tsx?$': ['@swc/jest'] };
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  reporters: ['default', '<rootDir>/test/support/totals-reporter.js'],
  maxWorkers: 2,
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
