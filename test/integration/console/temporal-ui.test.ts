// The operator's console end to end: worker processes started by the CLI, the Temporal UI in a
// real headless Chromium. The flow's list shows each partition's phase, owner, generation, lag and
// keys as columns (the column set-up the README documents); a partition's page shows the
// current-details panel; once the flow's last worker has stopped its partitions show `idle` and
// stay so — a worker of another flow does not run them (each flow has its own workflow task
// queue); `retire` refuses while a worker of the flow is alive and then ends its partition
// workflows, run to completion by the retire command itself.
import { Client, Connection } from '@temporalio/client';
import { readInfraSettings } from '../../../infra/settings';
import { FLOW_COLUMNS, flowColumnsStorage, flowUiUrl, renderPage } from '../../../scripts/temporal-ui';
import { searchAttributes } from '../../../workflows/search-attributes';
import { freshNamespace, runCli, temporalAddress } from '../../support/servers';
import { eventually, FlowCluster } from '../orchestration/harness';

const literal = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

test("the Temporal UI shows every partition's phase and owner and its current details; stopped workers leave it idle; retire ends it", async () => {
  const namespace = await freshNamespace('kft-console');
  const env = { TEMPORAL_NAMESPACE: namespace };
  // The test's own status reads (flowStatus) and the retire CLI use the namespace too.
  const savedNamespace = process.env.TEMPORAL_NAMESPACE;
  process.env.TEMPORAL_NAMESPACE = namespace;
  const flow = new FlowCluster(3, { env, sessionTimeoutMs: 6000 });
  const other = new FlowCluster(1, { env });
  const connection = await Connection.connect({ address: temporalAddress });
  const client = new Client({ connection, namespace });
  const s = readInfraSettings();
  const ui = `http://${s.temporal.host}:${s.temporal.uiPort}`;
  const listUrl = flowUiUrl(ui, namespace, flow.names.name);
  const ids = [0, 1, 2].map((p) => `kafka-flow/${flow.names.name}/${flow.names.topic}/${p}`);
  // A list row's cells in FLOW_COLUMNS' order: id, phase, generation, lag, keys, owner.
  const row = (id: string, cells: string) => new RegExp(`${literal(id)}\\s+${cells}`);
  try {
    await Promise.all([flow.start(), other.start()]);
    await flow.produce(600);
    other.startWorker('other');
    const worker = flow.startWorker('a');
    const running = await flow.untilRunningOn(1, 'every partition running on worker a');
    const owner = running[0]!.owner!;

    // The list: phase, owner, generation, lag and keys of every partition (lag and keys come with the first reports).
    expect(FLOW_COLUMNS).toEqual(expect.arrayContaining(['KafkaFlowPhase', 'KafkaOwner', 'KafkaGeneration', 'KafkaLag', 'KafkaKeys']));
    const listed = (text: string, cells: string) => ids.every((id) => row(id, cells).test(text));
    const runningCells = `running\\s+${owner.generation}\\s+\\d+\\s+\\d+\\s+${literal(owner.memberId)}`;
    const list = await renderPage(listUrl, { localStorage: flowColumnsStorage(namespace), until: (t) => listed(t, runningCells), timeoutMs: 60_000 });
    for (const id of ids) expect(list.text).toMatch(row(id, runningCells));

    // A partition's page: the current-details panel, kept current by the owner's reports.
    const handle = client.workflow.getHandle(ids[0]!);
    const { runId } = await handle.describe();
    const detailUrl = `${ui}/namespaces/${namespace}/workflows/${encodeURIComponent(ids[0]!)}/${runId}/user-metadata`;
    const detail = await renderPage(detailUrl, { until: (t) => /Last error/.test(t), timeoutMs: 60_000 });
    expect(detail.text).toContain('Current Details');
    expect(detail.text).toMatch(/running since \d\d:\d\d:\d\d UTC/);
    expect(detail.text).toContain(`generation ${owner.generation}, member ${owner.memberId}`);
    expect(detail.text).toMatch(/Offsets: committed \d+ · log end \d+ · lag \d+/);
    expect(detail.text).toMatch(/Keys in memory: \d+/);
    expect(detail.text).toMatch(/Last persist: \d\d:\d\d:\d\d UTC, \d+ keys written/);
    expect(detail.text).toMatch(/Restore: 100 % — \d+ keys/);
    expect(detail.text).toContain('Last error: none');
    // No record key in it (the flow's keys are k0…k49; logKeys is off).
    expect(detail.text).not.toMatch(/\bk\d+\b/);

    // Retire refuses while a worker of the flow is alive.
    const refused = await runCli(['retire', flow.names.name], env);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain(`flow "${flow.names.name}" still has live workers`);

    // The flow's last worker stops: its partitions go idle, and stay so past the session timeout
    // (6 s): only the flow's own workers run its workflows (`unowned` is decided by a worker of the
    // flow, and none is left), not the other flow's worker.
    expect(await flow.stop(worker)).toBe(0);
    const phases = () => Promise.all(ids.map(async (id) => (await client.workflow.getHandle(id).describe()).typedSearchAttributes.get(searchAttributes.phase)));
    await eventually('every partition idle', async () => (await phases()).every((p) => p === 'idle') || undefined);
    // The runs carried over between owners (continued as new once idle); the stopping worker,
    // still polling while it waits for its revokes to be handled, ran the new runs' first tasks.
    for (const id of ids) {
      const d = await client.workflow.getHandle(id).describe();
      expect({ id, continued: d.runId !== d.raw.workflowExecutionInfo?.firstRunId }).toEqual({ id, continued: true });
    }
    const revokeWait = flow.logLines<{ msg?: string }>(worker).filter((l) => / handled the revoke/.test(l.msg ?? '')).map((l) => l.msg);
    expect(revokeWait).toEqual(['the partition workflows handled the revoke']);
    await new Promise((r) => setTimeout(r, 9_000));
    expect(await phases()).toEqual(['idle', 'idle', 'idle']);
    const idleCells = `idle\\s+${owner.generation}\\s+\\d+\\s+\\d+\\s+${literal(owner.memberId)}`;
    const idle = await renderPage(listUrl, { localStorage: flowColumnsStorage(namespace), until: (t) => listed(t, idleCells), timeoutMs: 60_000 });
    for (const id of ids) expect(idle.text).toMatch(row(id, idleCells));

    // Nobody owns a partition now, and the worker stopped gracefully (its revokes say `shutdown`):
    // retire is accepted at once, though its pollers are still listed (a worker killed without a
    // stop counts as alive until its last poll is old: test/unit/workers/cli/retire-liveness.test.ts).
    // It ends every partition workflow, running them to completion on the flow's workflow task queue itself.
    const retired = await runCli(['retire', flow.names.name, '--wait', '30'], env);
    if (retired.code !== 0) throw new Error(`retire exited ${retired.code}:\n${retired.out}`);
    for (const id of ids) expect(retired.out).toMatch(new RegExp(`${literal(id)}\\s+completed`));
    expect(retired.out).toContain(`retired 3 partition workflows of flow "${flow.names.name}" (3 completed, 0 terminated)`);
    for (const id of ids) {
      const d = await client.workflow.getHandle(id).describe();
      expect([d.status.name, d.typedSearchAttributes.get(searchAttributes.phase)]).toEqual(['COMPLETED', 'retired']);
    }
    const closed = await renderPage(listUrl, { localStorage: flowColumnsStorage(namespace), until: (t) => listed(t, 'retired'), timeoutMs: 60_000 });
    for (const id of ids) expect(closed.text).toMatch(row(id, 'retired'));
    // The other flow was not touched.
    expect((await other.status()).map((p) => p.phase)).toEqual(['running']);
  } finally {
    if (savedNamespace === undefined) delete process.env.TEMPORAL_NAMESPACE;
    else process.env.TEMPORAL_NAMESPACE = savedNamespace;
    await Promise.all([flow.close(), other.close()]);
    await connection.close();
  }
}, 420_000);
