// The package's entry points (package.json "exports"): each target exists, and
// `kafka-flow-temporal/testing` hands out the very classes of the root, not copies.
import fs from 'node:fs';
import path from 'node:path';
import * as root from '../../index';
import * as testing from '../../testing';

const packageRoot = path.join(__dirname, '../..');
const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { main: string; exports: Record<string, string> };

test('the entry points are the root index and testing', () => {
  expect(Object.keys(pkg.exports)).toEqual(['.', './testing', './package.json']);
  expect(pkg.exports['.']).toBe(`./${pkg.main}`);
  for (const target of Object.values(pkg.exports)) expect(fs.existsSync(path.join(packageRoot, target))).toBe(true);
});

test('testing re-exports the root classes and points at the workflow code', () => {
  expect(testing.ManualClock).toBe(root.ManualClock);
  expect(testing.createPartitionFlow).toBe(root.createPartitionFlow);
  expect(testing.silentLogger).toBe(root.silentLogger);
  expect(testing.InMemoryBackend).toBe(root.InMemoryBackend);
  expect(testing.InMemorySnapshotStore).toBe(root.InMemorySnapshotStore);
  expect(testing.InMemoryJournalStore).toBe(root.InMemoryJournalStore);
  expect(testing.InMemoryKeyStore).toBe(root.InMemoryKeyStore);
  expect(testing.InMemoryOffsetCommitter).toBe(root.InMemoryOffsetCommitter);
  expect(testing.workflowsPath).toBe(require.resolve('../../workflows'));
});
