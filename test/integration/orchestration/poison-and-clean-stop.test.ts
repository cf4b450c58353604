import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { defaultDeadLetterTopic, DEAD_LETTER_HEADERS } from '../../../flow/poison';
import { createKafkaClient, KafkaAdmin } from '../../../kafka';
import { type HashState, isPoison, step } from '../../fixtures/offset-hash-flow';
import { kafkaBrokers, unique } from '../../support/servers';
import { eventually, FlowCluster } from './harness';

// Real workers of a flow whose fold throws on every 40th record, with onFoldFailure 'dead-letter'
// and transactional Kafka persistence: through a kill -9 under load and a restart, every poison
// record lands in the dead-letter topic exactly once (read_committed), and the state is exactly
// the fold of the other records. Then a graceful stop: every partition shows `idle`, and no
// activity of the stopped worker times out in the partition workflows' histories.
const EVERY = 40;

test('poison records are dead-lettered exactly once through kill -9; a clean stop leaves idle partitions and no timeouts', async () => {
  const cluster = new FlowCluster(3, { persistEveryMs: 500, sessionTimeoutMs: 6000, env: { TEST_POISON_EVERY: String(EVERY) } });
  const client = createKafkaClient({ brokers: kafkaBrokers, clientId: unique('poison'), logLevel: 'nothing' });
  try {
    const temporalClient = await cluster.temporal();
    await cluster.start();
    await cluster.produce(1200);
    const a = cluster.startWorker('a');
    await cluster.untilRunningOn(1, 'a runs all partitions');
    await cluster.untilCaughtUp('a caught up');
    const load = cluster.produce(1200);
    await new Promise((r) => setTimeout(r, 400 + Math.floor(Math.random() * 600)));
    a.process.kill('SIGKILL'); // mid-run: some dead letters and snapshots written, some not
    await a.exited;
    await load;
    const b = cluster.startWorker('b');
    await cluster.untilRunningOn(1, 'b runs all partitions', 120_000);
    await cluster.untilCaughtUp('b caught up');
    const bQueue = await eventually('b\'s task queue', async () => (await cluster.status().catch(() => undefined))?.[0]?.owner?.taskQueue);
    expect(await cluster.stop(b)).toBe(0);
    // The last worker's stop waited until its partition workflows had handled the revokes (and
    // run the first tasks of the runs they continued as new, when they carried over).
    const revokeWait = cluster.logLines<{ msg?: string }>(b).filter((l) => / handled the revoke/.test(l.msg ?? '')).map((l) => l.msg);
    expect(revokeWait).toEqual(['the partition workflows handled the revoke']);
    // Every JSON line names its flow once (the backend's lines too: the worker's logger binds it).
    expect(cluster.log(b).split('\n').filter((l) => /"flow":.*"flow":/.test(l))).toEqual([]);

    // State: the fold of every record but the poison ones.
    const { reference, poison } = await referenceWithout(cluster);
    expect(poison.length).toBe(Math.ceil(2400 / EVERY));
    expect(await cluster.persisted()).toEqual(reference);

    // Dead letters: each poison record exactly once, with where it came from.
    const letters = await deadLetters(cluster, client, defaultDeadLetterTopic(cluster.names.group, cluster.names.name, cluster.names.topic));
    expect(letters.map((l) => `${l.partition}/${l.offset}`).sort()).toEqual(poison.map((p) => `${p.partition}/${p.offset}`).sort());
    expect(letters.every((l) => l.reason === 'fold' && l.flow === cluster.names.name && /poison record/.test(l.error))).toBe(true);

    // The clean stop: idle partitions, and no activity left to time out.
    await eventually('every partition idle (search attributes)', async () => {
      const phases = await searchAttributePhases(temporalClient, cluster.names.name);
      return phases.length === 3 && phases.every((p) => p === 'idle') ? true : undefined;
    }, 30_000, async () => `phases: ${(await searchAttributePhases(temporalClient, cluster.names.name)).join(', ')}`);
    // b has exited and every partition is idle: an activity on b's queue still pending on the server
    // can only end by timing out (nobody is left to complete it), so none may be pending now — which
    // says at once what waiting out the heartbeat timeout (10 s) would — and none may have timed out.
    // (The killed worker's activities time out, by design: only the stopped worker's count.)
    for await (const wf of temporalClient.workflow.list({ query: `KafkaFlow = "${cluster.names.name}" AND ExecutionStatus = "Running"` })) {
      const handle = temporalClient.workflow.getHandle(wf.workflowId);
      const described = await handle.describe();
      const history = await handle.fetchHistory();
      const events = history.events ?? [];
      const queueOf = (scheduled: unknown) =>
        events.find((e) => Number(e.eventId) === Number(scheduled))?.activityTaskScheduledEventAttributes?.taskQueue?.name;
      const queueOfActivity = (activityId: string | null | undefined) =>
        events.find((e) => e.activityTaskScheduledEventAttributes?.activityId === activityId)?.activityTaskScheduledEventAttributes?.taskQueue?.name;
      const pendingOnB = (described.raw.pendingActivities ?? []).filter((a) => queueOfActivity(a.activityId) === bQueue);
      expect({ workflow: wf.workflowId, pendingOnB: pendingOnB.map((a) => a.activityType?.name) }).toEqual({ workflow: wf.workflowId, pendingOnB: [] });
      const timedOut = events.filter(
        (e) =>
          e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT &&
          queueOf(e.activityTaskTimedOutEventAttributes?.scheduledEventId) === bQueue,
      );
      expect({ workflow: wf.workflowId, timedOutAfterStop: timedOut.length }).toEqual({ workflow: wf.workflowId, timedOutAfterStop: 0 });
    }
  } finally {
    await cluster.close();
  }
}, 400_000);

async function referenceWithout(cluster: FlowCluster) {
  const reference = new Map<string, HashState>();
  const poison: Array<{ partition: number; offset: string }> = [];
  await cluster.readTopic(cluster.names.topic, cluster.partitions, (r, p) => {
    const n = (JSON.parse(String(r.value)) as { n: number }).n;
    if (isPoison(n, EVERY)) {
      poison.push({ partition: p, offset: r.offset });
      return;
    }
    const key = String(r.key);
    reference.set(key, step(reference.get(key), r.offset));
  });
  return { reference, poison };
}

async function deadLetters(cluster: FlowCluster, client: ReturnType<typeof createKafkaClient>, topic: string) {
  const admin = new KafkaAdmin(client);
  const partitions = (await admin.describeTopic(topic))?.partitions ?? 0;
  await admin.close();
  const out: Array<{ partition: number; offset: string; reason: string; flow: string; error: string }> = [];
  await cluster.readTopic(topic, partitions, (r) => {
    const h = (name: string) => String(r.headers[name]);
    out.push({
      partition: Number(h(DEAD_LETTER_HEADERS.partition)),
      offset: h(DEAD_LETTER_HEADERS.offset),
      reason: h(DEAD_LETTER_HEADERS.reason),
      flow: h(DEAD_LETTER_HEADERS.flow),
      error: h(DEAD_LETTER_HEADERS.error),
    });
  });
  return out;
}

async function searchAttributePhases(client: Client, flow: string): Promise<string[]> {
  const phases: string[] = [];
  for await (const wf of client.workflow.list({ query: `KafkaFlow = "${flow}" AND ExecutionStatus = "Running"` })) {
    const phase = wf.searchAttributes?.KafkaFlowPhase;
    phases.push(Array.isArray(phase) ? String(phase[0]) : String(phase));
  }
  return phases;
}
