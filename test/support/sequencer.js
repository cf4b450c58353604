// The order jest starts test files in. The integration files run several at once (jest.config.js,
// maxWorkers), and most of their time is waiting on real servers, so the run lasts about as long
// as its longest file when that one starts first. jest's own order puts the files that took
// longest last time first, but a clean clone (CI) has no such record and falls back to file size:
// the quick chaos run (a short file, ≈ 3.5 min) would start last and end the run minutes after
// everything else. So the files known to be long start first, in this order, whatever the record
// says; then a few that start servers of their own (not beside the chaos run, which is over by
// then); then the other long files; the rest keep jest's order, so the run ends on short files.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

/** Slowest first (each file alone, one after the other, 2 December 2026). Paths from the repository root. */
const LONG_FIRST = [
  'test/integration/chaos/quick.test.ts',
  'test/integration/orchestration/stale-owner.test.ts',
  'test/integration/orchestration/temporal-restart.test.ts',
  'test/integration/local-state/restore.test.ts',
  'test/integration/cli/worker.test.ts',
  'test/integration/workflows/partition-workflow.test.ts',
  'test/integration/orchestration/rebalance.test.ts',
];

/**
 * Started once LONG_FIRST is taken, after the quick chaos run (≈ 3 min, started first) is over: files
 * whose own servers (a secured Cassandra and Temporal, a private Cassandra to freeze or kill) beside
 * the chaos run's private Kafka, Temporal and Cassandra left a 2-core machine too busy for either
 * (a fresh-clone run failed both at once). Not at the very end: three files of ≈ 1 min each there
 * left one lane running them while the other had nothing to do (a fresh-clone run took 952 s).
 */
const AFTER_CHAOS = [
  'test/integration/orchestration/self-healing.test.ts',
  'test/integration/cassandra/kill9-recovery.test.ts',
  'test/integration/cassandra/outage.test.ts',
  'test/integration/security/secured-servers.test.ts',
];

/** The other files of more than ≈ 30 s (a fresh-clone run, 5 December 2026), longest first. */
const LONG_NEXT = [
  'test/integration/orchestration/key-timers.test.ts',
  'test/integration/local-state/state-cache-timers.test.ts',
  'test/integration/orchestration/cassandra-workers.test.ts',
  'test/integration/console/live-state.test.ts',
  'test/integration/console/temporal-ui.test.ts',
  'test/integration/cassandra/marker-ttl.test.ts',
];

class LongFirstSequencer extends Sequencer {
  sort(tests) {
    const root = path.resolve(__dirname, '..', '..');
    const ordered = [...LONG_FIRST, ...AFTER_CHAOS, ...LONG_NEXT];
    const rank = (test) => {
      const file = path.relative(root, test.path).split(path.sep).join('/');
      const at = ordered.indexOf(file);
      return at === -1 ? ordered.length : at;
    };
    // Array.prototype.sort is stable: within the rest, jest's order stands.
    return [...super.sort(tests)].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = LongFirstSequencer;
module.exports.LONG_FIRST = LONG_FIRST;
module.exports.AFTER_CHAOS = AFTER_CHAOS;
module.exports.LONG_NEXT = LONG_NEXT;
