// Writes the run's totals to .jest-results.json so that .ci/run can print the plain line
// "N passed, N failed" — a run that executed no test must not pass unnoticed.
const fs = require('node:fs');
const path = require('node:path');

class TotalsReporter {
  constructor(globalConfig) {
    this.file = path.join(globalConfig.rootDir, '.jest-results.json');
  }
  onRunComplete(_contexts, results) {
    const totals = {
      passed: results.numPassedTests,
      failed: results.numFailedTests,
      skipped: results.numPendingTests + results.numTodoTests,
      failedSuites: results.numFailedTestSuites + results.numRuntimeErrorTestSuites,
      // jest sets results.success only after reporters ran, so decide here the way it will.
      success:
        results.numFailedTests === 0 &&
        results.numFailedTestSuites === 0 &&
        results.numRuntimeErrorTestSuites === 0 &&
        !results.snapshot.failure &&
        !results.runExecError &&
        !results.wasInterrupted,
    };
    fs.writeFileSync(this.file, JSON.stringify(totals, null, 2));
  }
}
module.exports = TotalsReporter;
