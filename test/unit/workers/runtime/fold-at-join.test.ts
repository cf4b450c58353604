import { defineFlow } from '../../../../index';
import { silentLogger } from '../../../../core/logger';
import { FlowMetrics } from '../../../../flow/metrics';
import { memoryBackend } from '../../../../persistence/memory/factory';
import type { PersistenceBackend } from '../../../../persistence/backends';
import { FlowRuntime } from '../../../../workers/runtime/flow-runtime';
import { driveFolding } from '../../../support/fold-loop';
import { FakeFlowConsumer, RecordingSignals } from './fake-flow-consumer';
import { counts, flushingOnRevoke } from './test-flows';

// foldAtJoin: a recovery started at the join and done before its workflow's recover activity
// came folds the partition at once (HostSide.foldEarly), until the workflow takes over. The
// consumer and the workflow signals are in-memory fakes; the worker's real wiring runs in the
// integration tests (every worker folds at the join by default).
const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
const req = (partition = 0) => ({ flow: 'counts', topic: 't', partition, owner });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function setup(o: { flow?: typeof counts; backend?: PersistenceBackend<unknown, unknown>; reassertAfterMs?: number } = {}) {
  const flow = o.flow ?? counts;
  const consumer = new FakeFlowConsumer();
  const signals = new RecordingSignals();
  const runtime = new FlowRuntime({
    definition: flow,
    consumer,
    signals,
    taskQueue: 'tq-1',
    backend: o.backend ?? memoryBackend(flow),
    metrics: FlowMetrics.of(),
    logger: silentLogger,
    reassertAfterMs: o.reassertAfterMs,
    foldAtJoin: true,
  });
  return { consumer, signals, runtime };
}

/** Waits until the partition folds ahead of its workflow (its readiness says so). */
async function untilFoldingAhead(runtime: FlowRuntime, partition = 0): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (runtime.partitionsReady().notReady.some((p) => p.partition === partition && p.state === 'folding, awaiting its workflow')) return;
    await sleep(5);
  }
  throw new Error(`t-${partition} never folded ahead of its workflow`);
}

describe('folding at the join (foldAtJoin)', () => {
  let rt: ReturnType<typeof setup>;
  afterEach(async () => {
    await rt.runtime.stop(10);
  });

  test('a recovery done before its activity folds at once; its activity and fold loop take over without rewinding, and the first persist commits everything folded', async () => {
    rt = setup();
    await rt.runtime.start();
    rt.consumer.committed.set('t-0', '5');
    rt.consumer.join(1, { t: [0] });
    await untilFoldingAhead(rt.runtime);
    expect(rt.consumer.seeks).toEqual([{ topic: 't', partition: 0, offset: '5' }]);
    expect(rt.consumer.paused.has('t-0')).toBe(false);

    // Folded before any activity of the workflow ran.
    const early = await rt.consumer.deliver('t', 0, [
      { offset: 5, key: 'a', value: { n: 1 } },
      { offset: 6, key: 'b', value: { n: 10 } },
    ], '9');
    expect(early).toMatchObject({ resolved: '6', pausedByBatch: false });
    // Its workflow has not taken over: no periodic persist (persistEvery 1 ms), not ready.
    await sleep(20);
    expect(rt.consumer.commits).toEqual([]);
    expect(rt.runtime.partitionsReady().notReady).toEqual([{ topic: 't', partition: 0, state: 'folding, awaiting its workflow' }]);

    // The recover activity takes the recovery over as it is: from the committed offset, no seek back.
    const recovered = await rt.runtime.recover({ ...req(), recovery: 'r1' });
    expect(recovered).toMatchObject({ fromMemory: false, committedOffset: '5' });
    expect(rt.consumer.seeks).toHaveLength(1);
    expect(rt.runtime.recoveryDone({ ...req(), afterRecovery: 'r1' })).toBe('done');

    const folding = driveFolding(rt.runtime.startFolding(req()));
    expect(await rt.consumer.deliver('t', 0, [{ offset: 7, key: 'a', value: { n: 2 } }], '9')).toMatchObject({ resolved: '7', pausedByBatch: false });
    expect(folding.poll()).toMatchObject({ running: true, progress: { position: '8' } });
    expect(rt.runtime.partitionsReady().notReady).toEqual([]);

    await sleep(5);
    const persisted = await rt.runtime.persist(req());
    expect(persisted).toMatchObject({ committedOffset: '8', liveKeys: 2 });
    expect(rt.consumer.commits.at(-1)).toEqual({ topic: 't', partition: 0, offset: '8' });
  });

  test('a recover activity that comes before the recovery is done takes it over as before: nothing is folded ahead', async () => {
    const inner = memoryBackend(counts);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const backend: PersistenceBackend<unknown, unknown> = {
      forPartition: async (o) => {
        await gate;
        return inner.forPartition(o);
      },
      close: () => inner.close(),
    };
    rt = setup({ backend });
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    const recovering = rt.runtime.recover({ ...req(), recovery: 'r1' });
    release();
    await expect(recovering).resolves.toMatchObject({ fromMemory: false, committedOffset: '0' });
    await sleep(20);
    // Recovered by its activity: paused until the workflow's fold loop starts.
    expect(await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: undefined, pausedByBatch: true });
    expect(rt.runtime.partitionsReady().notReady).toEqual([{ topic: 't', partition: 0, state: 'assigned' }]);
  });

  test('a partition folding ahead of a workflow that never takes over is signalled again by the reassert watchdog', async () => {
    rt = setup({ reassertAfterMs: 60 });
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    await untilFoldingAhead(rt.runtime);
    expect(rt.signals.assignedCalls).toHaveLength(1);
    await sleep(300);
    expect(rt.signals.assignedCalls.length).toBeGreaterThanOrEqual(2);
    expect(rt.signals.assignedCalls.at(-1)?.[1]).toMatchObject({ generation: 1, memberId: 'member-1' });
  });

  test('a revoke while folding ahead flushes what was folded under the join\'s generation and signals the revoke; the early loop ends', async () => {
    rt = setup({ flow: flushingOnRevoke });
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    await untilFoldingAhead(rt.runtime);
    await rt.consumer.deliver('t', 0, [
      { offset: 0, key: 'a', value: { n: 1 } },
      { offset: 1, key: 'a', value: { n: 1 } },
    ]);
    await rt.consumer.revoke();
    expect(rt.consumer.commits).toEqual([{ topic: 't', partition: 0, offset: '2' }]);
    expect(rt.signals.revokedCalls).toHaveLength(1);
    expect(rt.signals.revokedCalls[0]?.[1]).toMatchObject({ generation: 1, flushed: { committedOffset: '2' } });
    // Nothing more is folded here.
    expect(await rt.consumer.deliver('t', 0, [{ offset: 2, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: undefined, pausedByBatch: true });
  });

  test('a partition whose early fold failed is recovered afresh by its activity', async () => {
    const failing = defineFlow<number, { n: number }>({
      name: 'counts',
      groupId: 'counts',
      topics: ['t'],
      fold: (s, r) => {
        if (r.value.n < 0) throw new Error('bad record');
        return (s ?? 0) + r.value.n;
      },
      timers: { persistPeriodically: { fireEvery: 1, persistEvery: 1 } },
      idleFlush: false,
    }) as never;
    const inner = memoryBackend(failing);
    let built = 0;
    const backend: PersistenceBackend<unknown, unknown> = {
      forPartition: async (o) => {
        built++;
        return inner.forPartition(o);
      },
      close: () => inner.close(),
    };
    rt = setup({ flow: failing, backend });
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    await untilFoldingAhead(rt.runtime);
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: -1 } }]);
    expect(rt.runtime.partitionsReady().notReady).toEqual([{ topic: 't', partition: 0, state: 'failed' }]);
    await expect(rt.runtime.recover({ ...req(), recovery: 'r1' })).resolves.toMatchObject({ fromMemory: false, committedOffset: '0' });
    expect(built).toBe(2);
  });
});
