// Two projects: `unit` (pure, in-memory, fast) and `integration` (real Kafka, Temporal and
// Cassandra, started once per run by test/support/global-setup.ts when not already up).
//
// Files run several at once, whatever the number of cores: the integration files spend their time
// waiting on real servers (session timeouts, persist cycles, worker starts, server restarts), not
// computing, so side by side they take about as long as the longest of them. Every integration
// file is isolated for this: its own topics, groups, flows, keyspaces and state directories (unique
// names), and a private server of its own for a test that stops or freezes one. The known long
// files start first (test/support/sequencer.js). `--maxWorkers` / `-i` on the command line still
// override this.
const transform = { '^.+\\.tsx?$': ['@swc/jest'] };
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  reporters: ['default', '<rootDir>/test/support/totals-reporter.js'],
  maxWorkers: 3,
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/integration-setup.ts'],
    },
  ],
};
