import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { silentLogger } from '../../../../core/logger';
import { loadWorkflowBundle } from '../../../../workers/bundle/workflow-bundle';
import { workflowBundleBuilder } from '../../../../workers/bundle/workflow-bundle-build';

// The real bundler (webpack, ≈ 6 s of CPU): the inputs it records are the workflow sources and the
// Temporal workflow library, and the bundle read back from the cache replays the recorded
// partition-workflow histories as the one Worker.create builds from workflowsPath does
// (test/unit/workflows/replay.test.ts).

const workflowsPath = require.resolve('../../../../workflows');
const root = path.resolve(__dirname, '../../../..');
const historiesDir = path.join(root, 'test/histories');
let cacheDir: string;

beforeAll(() => {
  cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bundle-real-'));
});
afterAll(() => fs.rmSync(cacheDir, { recursive: true, force: true }));

test('the recorded inputs are the workflow sources and the workflow library; the cached bundle replays the recorded histories', async () => {
  let inputs: { files: string[]; absent: string[] } | undefined;
  const quiet = () => undefined;
  const builder = workflowBundleBuilder({ log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet });
  const build = async (p: string) => {
    const built = await builder(p);
    inputs = built;
    return built;
  };
  const built = await loadWorkflowBundle({ workflowsPath, cacheDir, build, logger: silentLogger });
  expect(built.source).toBe('built');
  const files = inputs!.files.map((f) => path.relative(root, fs.realpathSync(f)));
  expect(files).toEqual(expect.arrayContaining(['workflows/index.ts', 'workflows/partition-workflow.ts', 'workflows/search-attributes.ts']));
  expect(files.some((f) => /node_modules\/@temporalio\/workflow\/lib\/worker-interface\.js$/.test(f))).toBe(true);
  expect(files.some((f) => /node_modules\/@temporalio\/workflow\/package\.json$/.test(f))).toBe(true);
  // Only what the workflows import (the activities' types), no activity or worker code.
  expect(files.filter((f) => /^(activities|workers|flow|persistence|kafka|core)\//.test(f))).toEqual(['activities/types.ts']);

  const cached = await loadWorkflowBundle({ workflowsPath, cacheDir, build, logger: silentLogger });
  expect(cached).toEqual({ code: built.code, source: 'cache' });

  const histories = fs
    .readdirSync(historiesDir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => ({ workflowId: f, history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(historiesDir, f), 'utf8'))) }));
  const failures: string[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle: { code: cached.code } }, histories)) {
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
}, 90_000);
