import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

// The reporter behind .ci/run's "N passed, N failed" line: a failed test counts once.
const root = path.join(__dirname, '../../../..');
const reporterPath = path.join(root, 'test/support/totals-reporter.js');
const { totals } = require(reporterPath) as { totals: (r: unknown) => { passed: number; failed: number; success: boolean } };

const suite = (failing: number, passing: number, execError = false) => ({
  numFailingTests: failing,
  numPassingTests: passing,
  numPendingTests: 0,
  numTodoTests: 0,
  skipped: false,
  testExecError: execError ? { message: 'Cannot find module' } : undefined,
});

const aggregate = (suites: ReturnType<typeof suite>[]) => ({
  testResults: suites,
  numPassedTests: suites.reduce((n, s) => n + s.numPassingTests, 0),
  numFailedTests: suites.reduce((n, s) => n + s.numFailingTests, 0),
  numPendingTests: 0,
  numTodoTests: 0,
  numFailedTestSuites: suites.filter((s) => s.numFailingTests > 0 || s.testExecError).length,
  numRuntimeErrorTestSuites: suites.filter((s) => s.testExecError).length,
  snapshot: { failure: false },
  runExecError: undefined,
  wasInterrupted: false,
});

describe('totalsReporter', () => {
  test('one failed test counts once, not as a test and again as its suite', () => {
    const t = totals(aggregate([suite(1, 3), suite(0, 2)]));
    expect(t).toMatchObject({ passed: 5, failed: 1, success: false });
  });

  test('a suite that could not run counts once; a suite with a failed test and an exec error too', () => {
    const t = totals(aggregate([suite(0, 0, true), suite(2, 1, true), suite(0, 4)]));
    expect(t).toMatchObject({ passed: 5, failed: 3, success: false });
  });

  test('all green', () => {
    expect(totals(aggregate([suite(0, 2), suite(0, 1)]))).toMatchObject({ passed: 3, failed: 0, success: true });
  });

  test("against a real jest run: one failing test, one suite that cannot load, one passing test", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-totals-'));
    try {
      fs.writeFileSync(path.join(dir, 'a.test.js'), "test('fails', () => { expect(1).toBe(2); });\ntest('passes', () => {});\n");
      fs.writeFileSync(path.join(dir, 'b.test.js'), "require('./no-such-module');\ntest('never runs', () => {});\n");
      fs.writeFileSync(path.join(dir, 'c.test.js'), "test('passes too', () => {});\n");
      const config = { rootDir: dir, testMatch: ['<rootDir>/*.test.js'], reporters: [reporterPath], transform: {} };
      await promisify(execFile)(process.execPath, [path.join(root, 'node_modules/jest/bin/jest.js'), '--config', JSON.stringify(config), '--ci'], {
        cwd: dir,
        timeout: 60_000,
      }).catch((err: { code?: number }) => {
        expect(err.code).toBe(1); // jest fails the run, as it should
      });
      const written = JSON.parse(fs.readFileSync(path.join(dir, '.jest-results.json'), 'utf8'));
      expect(written).toMatchObject({ passed: 2, failed: 2, success: false });
      // the files that ran, with their wall time, longest first
      const files = (written.slowest as Array<{ file: string; seconds: number }>).map((f) => f.file);
      expect(files).toEqual(expect.arrayContaining(['a.test.js', 'c.test.js']));
      expect(written.slowest.every((f: { seconds: number }) => f.seconds >= 0)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
