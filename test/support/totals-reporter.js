// Writes the run's totals to .jest-results.json so that .ci/run can print the plain line
// "N passed, N failed" — a run that executed no test must not pass unnoticed — and the slowest
// files with their wall time (what to look at when the run gets long).
const fs = require('node:fs');
const path = require('node:path');

/**
 * The totals of an aggregated jest result. A failed test counts once: `failed` is the failed
 * tests plus the suites that failed without any failed test (a suite that could not run: a syntax
 * error, a throwing import, a failing beforeAll/afterAll). jest's own numFailedTestSuites also
 * counts every suite that holds a failed test, so adding it would count that test twice.
 */
function totals(results, rootDir = process.cwd()) {
  const suites = results.testResults ?? [];
  const failedWithoutFailedTest = suites.filter((s) => !s.skipped && s.testExecError && !(s.numFailingTests > 0)).length;
  return {
    passed: results.numPassedTests,
    failed: results.numFailedTests + failedWithoutFailedTest,
    failedTests: results.numFailedTests,
    failedSuitesWithoutFailedTest: failedWithoutFailedTest,
    skipped: results.numPendingTests + results.numTodoTests,
    // jest sets results.success only after reporters ran, so decide here the way it will.
    success:
      results.numFailedTests === 0 &&
      results.numFailedTestSuites === 0 &&
      results.numRuntimeErrorTestSuites === 0 &&
      !results.snapshot?.failure &&
      !results.runExecError &&
      !results.wasInterrupted,
    slowest: slowest(suites, rootDir, 15),
  };
}

/** The `count` files that took longest (start to end, seconds, paths from `rootDir`), longest first. */
function slowest(suites, rootDir, count) {
  return suites
    .filter((s) => s.perfStats && s.perfStats.end > 0)
    .map((s) => ({ file: path.relative(rootDir, s.testFilePath), seconds: Math.round((s.perfStats.end - s.perfStats.start) / 100) / 10 }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, count);
}

class TotalsReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.file = path.join(globalConfig.rootDir, '.jest-results.json');
  }
  onRunComplete(_contexts, results) {
    fs.writeFileSync(this.file, JSON.stringify(totals(results, this.rootDir), null, 2));
  }
}
module.exports = TotalsReporter;
module.exports.totals = totals;
