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
      success: results.success,
    };
    fs.writeFileSync(this.file, JSON.stringify(totals, null, 2));
  }
}
module.exports = TotalsReporter;
