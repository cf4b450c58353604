import path from 'node:path';
import { keyHash } from '../../../core/redact';
import { flowStatus } from '../../../workers/cli/flow-status';
import { partitionWorkflowId } from '../../../workflows/partition-workflow';
import { eventually } from '../../support/eventually';
import { historyText, startCli, topicWith, unique } from '../../support/servers';

/**
 * A real worker (the CLI) runs a flow whose fold throws `Error(\`bad ${value} for key ${key}\`)`
 * (test/fixtures/secret-fold-flow.ts): the partition fails, its failure goes to Temporal (the
 * activity's ApplicationFailure, the workflow's lastError) and to the worker's log. Without
 * logKeys neither the record's key nor its value may appear in the partition workflow's history
 * (payloads decoded), in the status query's lastError or in any line the worker printed; the
 * failure still says what failed and where (FoldError, FOLD_FAILED, topic, partition, offset, the
 * key's hash, the class of the fold's error). With logKeys the fold's message is shown: the log and
 * the history then hold the key and the value.
 */
const root = path.join(__dirname, '../../..');
const flowModule = path.join(root, 'test/fixtures/secret-fold-flow.ts');

const startWorker = (env: NodeJS.ProcessEnv) => startCli(['worker', flowModule], { KFT_EXIT_WITH_PARENT: '0', LOG_LEVEL: 'debug', TEMPORAL_LOG_LEVEL: 'info', ...env });

/** A one-partition topic holding a good record and, after it, the record the fold (or the filter) refuses. */
function produceInput(topic: string, key: string, secretValue: string, refusedBy: 'fold' | 'filter'): Promise<void> {
  return topicWith(topic, 1, [
    { key: `${key}-good`, value: JSON.stringify('fine') },
    { key, value: JSON.stringify(`${refusedBy === 'fold' ? 'refuse' : 'unfilterable'} ${secretValue}`) },
  ]);
}

async function failingWorker(logKeys: boolean, refusedBy: 'fold' | 'filter' = 'fold') {
  const names = { TEST_FLOW_NAME: unique('redact'), TEST_FLOW_GROUP: unique('redact-group'), TEST_FLOW_TOPIC: unique('redact-topic') };
  const secretKey = unique('SECRETKEY');
  const secretValue = unique('SECRETVALUE');
  await produceInput(names.TEST_FLOW_TOPIC, secretKey, secretValue, refusedBy);
  const worker = startWorker({ ...names, ...(logKeys ? { TEST_LOG_KEYS: '1' } : {}) });
  const workflowId = partitionWorkflowId({ flow: names.TEST_FLOW_NAME, topic: names.TEST_FLOW_TOPIC, partition: 0 });
  try {
    // The partition failed on the refused record (offset 1) and the workflow recorded it: retrying.
    const status = await eventually(`the ${refusedBy} failure recorded by the partition workflow`, async () => {
      if (worker.child.exitCode !== null) throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.output()}`);
      const rows = await flowStatus(names.TEST_FLOW_NAME).catch(() => []);
      const row = rows.find((r) => r.partition === 0);
      return row?.phase === 'retrying' && row.retry !== undefined ? row : undefined;
    }, 90_000, () => `the worker's last output lines:\n${worker.output().split('\n').slice(-30).join('\n')}`);
    const history = await eventually(`the ${refusedBy} failure in the workflow history`, async () => {
      const h = await historyText(workflowId);
      return h.includes('EVENT_TYPE_ACTIVITY_TASK_FAILED') ? h : undefined;
    }, 30_000);
    // The failure logged too ("partition failed …").
    await eventually(`the ${refusedBy} failure in the worker's log`, async () => (worker.output().includes('partition failed') ? true : undefined), 30_000);
    expect(await worker.stop()).toBe(0);
    return { secretKey, secretValue, status, history, logs: worker.output() };
  } finally {
    await worker.stop();
  }
}

/** Which of `secrets` `text` contains, by name (the secrets themselves are not repeated). */
function leaked(text: string, secrets: Record<string, string>): string[] {
  return Object.entries(secrets)
    .filter(([, secret]) => text.includes(secret))
    .map(([name]) => name);
}

describe('a fold that quotes its record in its error', () => {
  test('without logKeys: neither the key nor the value reaches the workflow history, the status or the logs; the failure still says what and where', async () => {
    const { secretKey, secretValue, status, history, logs } = await failingWorker(false);
    const secrets = { 'the record key': secretKey, 'the record value': secretValue };
    const lastError = status.retry?.lastError ?? '';
    expect({ history: leaked(history, secrets), lastError: leaked(lastError, secrets), logs: leaked(logs, secrets) }).toEqual({ history: [], lastError: [], logs: [] });
    // What is kept: the type, where it failed, the key's hash and the class of the fold's error.
    for (const text of [history, lastError]) {
      expect(text).toContain('FoldError');
      expect(text).toContain('offset 1');
      expect(text).toContain(`#${keyHash(secretKey)}`);
      expect(text).toContain('[redacted: logKeys is off]');
    }
    expect(logs).toContain('"code":"FOLD_FAILED"');
  }, 180_000);

  test('a filter that quotes its record (an error nothing of ours wraps): without logKeys only its class name reaches the history, the status and the logs', async () => {
    const { secretKey, secretValue, status, history, logs } = await failingWorker(false, 'filter');
    const secrets = { 'the record key': secretKey, 'the record value': secretValue };
    const lastError = status.retry?.lastError ?? '';
    expect({ history: leaked(history, secrets), lastError: leaked(lastError, secrets), logs: leaked(logs, secrets) }).toEqual({ history: [], lastError: [], logs: [] });
    for (const text of [history, lastError, logs]) expect(text).toContain('TypeError: [redacted: logKeys is off]');
  }, 180_000);

  test('with logKeys: the fold\'s message, key and value included, is in the logs and in the workflow history', async () => {
    const { secretKey, secretValue, status, history, logs } = await failingWorker(true);
    expect(logs).toContain(`bad refuse ${secretValue} for key ${secretKey}`);
    expect(status.retry?.lastError).toContain(`bad refuse ${secretValue} for key ${secretKey}`);
    expect(history).toContain(secretValue);
    expect(history).toContain(secretKey);
  }, 180_000);
});
