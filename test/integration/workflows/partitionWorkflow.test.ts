import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { assignedSignal, partitionWorkflow, partitionWorkflowId, revokedSignal, statusQuery } from '../../../workflows/partitionWorkflow';
import { eventually } from '../../support/eventually';
import { temporalAddress, temporalNamespace, unique } from '../../support/servers';
import { type Calls, newCalls, type OwnerScript, scriptedOwner } from './scriptedOwner';

// The partition workflow on the real Temporal server, with scripted activities standing in for
// the owning processes. The lifecycle cases (generations, supersession, revoke, fences, dead owners,
// retries, continueAsNew) run on the time-skipping test server in
// partitionWorkflow.timeskipping.test.ts; what stays here needs the real server: how its matching
// batches signals into workflow tasks when no worker polls, and the replay of those histories by a
// fresh worker.

describe('partitionWorkflow on the real Temporal server', () => {
  let connection: Connection;
  let client: Client;
  let native: NativeConnection;
  const workflowQueue = unique('wf');
  let workflowWorker: Worker;
  let running: Promise<void>;
  const owners: { worker: Worker; run: Promise<void> }[] = [];

  beforeAll(async () => {
    connection = await Connection.connect({ address: temporalAddress });
    client = new Client({ connection, namespace: temporalNamespace });
    native = await NativeConnection.connect({ address: temporalAddress });
    workflowWorker = await Worker.create({
      connection: native,
      namespace: temporalNamespace,
      taskQueue: workflowQueue,
      workflowsPath: require.resolve('../../../workflows'),
    });
    running = workflowWorker.run();
  });

  afterAll(async () => {
    for (const o of owners) o.worker.shutdown();
    await Promise.all(owners.map((o) => o.run));
    workflowWorker.shutdown();
    await running;
    await native.close();
    await connection.close();
  });

  async function startOwner(calls: Calls, script?: OwnerScript, taskQueue = unique('owner')): Promise<string> {
    const worker = await Worker.create({ connection: native, namespace: temporalNamespace, taskQueue, activities: scriptedOwner(calls, script) });
    owners.push({ worker, run: worker.run() });
    return taskQueue;
  }

  test('a revoke and the next assignment give the same commands whether they come in one workflow task or in two', async () => {
    // A chaos run caught a replay that saw the next assignment in the same activation as the revoke
    // while the original run had seen it in a later one: a nondeterminism error that left the
    // partition stuck. The commands after a revoke must not depend on how the signals are batched.
    const sequenceAfterRevoke = async (together: boolean): Promise<string[]> => {
      const queue = unique('wf-batching');
      const runWorker = async () => {
        const worker = await Worker.create({ connection: native, namespace: temporalNamespace, taskQueue: queue, workflowsPath: require.resolve('../../../workflows') });
        return { worker, run: worker.run() };
      };
      const a = newCalls();
      const b = newCalls();
      const qa = await startOwner(a);
      const qb = await startOwner(b);
      const ref = { flow: unique('flow'), topic: 'orders', partition: 1 };
      const workflowId = partitionWorkflowId(ref);
      let w = await runWorker();
      await client.workflow.signalWithStart(partitionWorkflow, {
        workflowId,
        taskQueue: queue,
        args: [{ ...ref, persistEveryMs: 300, limits: { heartbeatMs: 3000, scheduleToStartMs: 2000 } }],
        signal: assignedSignal,
        signalArgs: [{ generation: 1, memberId: 'a', taskQueue: qa }],
      });
      const handle = client.workflow.getHandle(workflowId);
      await eventually('running on a', async () => ((await handle.query(statusQuery)).phase === 'running' ? true : undefined));
      const revoke = { generation: 1, memberId: 'a', reason: 'revoke' as const };
      const assignB = { generation: 2, memberId: 'b', taskQueue: qb };
      if (together) {
        // No workflow worker while both signals arrive: the next workflow task carries both.
        w.worker.shutdown();
        await w.run;
        await handle.signal(revokedSignal, revoke);
        await handle.signal(assignedSignal, assignB);
        w = await runWorker();
      } else {
        await handle.signal(revokedSignal, revoke);
        await eventually('revoked', async () => ((await handle.query(statusQuery)).phase === 'revoked' ? true : undefined));
        await handle.signal(assignedSignal, assignB);
      }
      await eventually('recovered on b', () => (b.recover.length > 0 ? true : undefined), 60_000);
      const events = (await handle.fetchHistory()).events ?? [];
      await handle.terminate();
      w.worker.shutdown();
      await w.run;
      const revokedAt = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'revoked');
      const out: string[] = [];
      for (const e of events.slice(revokedAt)) {
        const upsert = e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.KafkaFlowPhase;
        if (upsert?.data) out.push(`upsert ${JSON.parse(Buffer.from(upsert.data).toString())}`);
        const scheduled = e.activityTaskScheduledEventAttributes?.activityType?.name;
        if (scheduled === 'recover') {
          out.push('schedule recover');
          break;
        }
      }
      return out;
    };
    const inTwo = await sequenceAfterRevoke(false);
    const inOne = await sequenceAfterRevoke(true);
    expect(inTwo).toEqual(['upsert revoked', 'upsert recovering', 'schedule recover']);
    expect(inOne).toEqual(inTwo);
  }, 120_000);
});
