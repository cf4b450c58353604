// The order jest starts test files in. The integration files run several at once (jest.config.js,
// maxWorkers), and most of their time is waiting on real servers, so the run lasts about as long
// as its longest file when that one starts first. jest's own order puts the files that took
// longest last time first, but a clean clone (CI) has no such record and falls back to file size:
// the quick chaos run (a short file, ≈ 3.5 min) would start last and end the run minutes after
// everything else. So the files known to be long start first, in this order, whatever the record
// says; the rest keep jest's order.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

/** Slowest first (each file alone, one after the other, 2 December 2026). Paths from the repository root. */
const LONG_FIRST = [
  'test/integration/chaos/quick.test.ts',
  'test/integration/security/secured-servers.test.ts',
  'test/integration/orchestration/self-healing.test.ts',
  'test/integration/orchestration/stale-owner.test.ts',
  'test/integration/cassandra/outage.test.ts',
  'test/integration/orchestration/temporal-restart.test.ts',
  'test/integration/local-state/restore.test.ts',
  'test/integration/cli/worker.test.ts',
  'test/integration/workflows/partition-workflow.test.ts',
  'test/integration/orchestration/rebalance.test.ts',
];

class LongFirstSequencer extends Sequencer {
  sort(tests) {
    const root = path.resolve(__dirname, '..', '..');
    const rank = (test) => {
      const i = LONG_FIRST.indexOf(path.relative(root, test.path).split(path.sep).join('/'));
      return i === -1 ? LONG_FIRST.length : i;
    };
    // Array.prototype.sort is stable: within the rest, jest's order stands.
    return [...super.sort(tests)].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = LongFirstSequencer;
module.exports.LONG_FIRST = LONG_FIRST;
