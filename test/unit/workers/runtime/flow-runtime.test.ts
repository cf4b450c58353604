import { KafkaJSConnectionError } from 'kafkajs';
import { StaleGenerationError } from '../../../../activities/partition-host';
import { driveFolding } from '../../../support/fold-loop';
import type { Owner } from '../../../../activities/types';
import { ProducerEpochLostError, SnapshotWriteFencedError } from '../../../../core/fence-errors';
import { defineFlow } from '../../../../index';
import { silentLogger } from '../../../../core/logger';
import { FlowMetrics } from '../../../../flow/metrics';
import { InMemoryOutputSender, InMemorySnapshotStore } from '../../../../persistence/memory';
import { StorePartitionPersistence } from '../../../../persistence/store-partition-persistence';
import { memoryBackend } from '../../../../persistence/memory/factory';
import type { PersistenceBackend } from '../../../../persistence/backends';
import { PartitionFlow } from '../../../../flow/partition-flow';
import { PartitionPersister } from '../../../../flow/partition-persister';
import { FlowRuntime, hasOutputs, timerTickMs } from '../../../../workers/runtime/flow-runtime';
import { FakeFlowConsumer, RecordingSignals } from './fake-flow-consumer';
import { counts, flushingOnRevoke, persistingEverySecond } from './test-flows';
import { InputOffsetOutOfRangeError, outOfRangeAction } from '../../../../workers/runtime/input-offset-range';
import { recordPendingOutputs } from '../../../support/pending-outputs';

// The runtime's own logic (slots, generations, the in-memory shortcut, revoke and stop) with the
// consumer and the workflow signals as in-memory fakes. The real wiring (kafkajs, Temporal) runs in
// the orchestration integration tests.
const definition = counts;

/** Emits an alert each time a key's total crosses a multiple of 10; outputs due 100 ms after their record. */
const alerting = defineFlow<number, { n: number }>({
  name: 'counts',
  groupId: 'counts',
  topics: ['t'],
  fold: (s, r, ctx) => {
    const total = (s ?? 0) + r.value.n;
    if (Math.floor(total / 10) > Math.floor((s ?? 0) / 10)) ctx.emit({ topic: 'alerts', key: r.key, value: total });
    return total;
  },
  persistence: { backend: 'kafka', transactional: true },
  outputTopics: ['alerts'],
  outputEvery: 100,
  timers: { persistPeriodically: { fireEvery: 60_000, persistEvery: 60_000 } },
  idleFlush: false, // (the tests with it are about outputEvery)
}) as never;

/** Emits one output per record (its offset); outputs are due only once the partition holds half of `maxPendingOutputs`, not by time. */
const echoingFlow = (maxPendingOutputs: number) =>
  defineFlow<number, { n: number }>({
    name: 'counts',
    groupId: 'counts',
    topics: ['t'],
    fold: (s, r, ctx) => {
      ctx.emit({ topic: 'alerts', key: r.key, value: Number(r.offset) });
      return (s ?? 0) + 1;
    },
    persistence: { backend: 'kafka', transactional: true },
    outputTopics: ['alerts'],
    outputEvery: '10 min',
    maxPendingOutputs,
    timers: { persistPeriodically: { fireEvery: 60_000, persistEvery: 600_000 } },
    idleFlush: false, // (the tests with it are about maxPendingOutputs)
  }) as never;
const echoing = echoingFlow(50);

/** An output sender whose broker is away (the Kafka client's error: its message is shown without logKeys). */
class DownSender extends InMemoryOutputSender {
  override async send(): Promise<void> {
    throw new KafkaJSConnectionError('broker away');
  }
}

/** A sender whose sends wait until `fail()`, then throw: an outputs persist in flight that fails. */
class FailingLaterSender extends InMemoryOutputSender {
  private readonly gate: Promise<void>;
  fail: () => void = () => undefined;
  sends = 0;
  constructor() {
    super();
    this.gate = new Promise<void>((resolve) => (this.fail = resolve));
  }
  override async send(): Promise<void> {
    this.sends++;
    await this.gate;
    throw new KafkaJSConnectionError('broker away');
  }
}

/** A sender whose producer lost its epoch (a stale process re-initialized the transactional.id). */
class EpochLostSender extends InMemoryOutputSender {
  override async send(): Promise<void> {
    throw new SnapshotWriteFencedError('t', 0, 'INVALID_PRODUCER_EPOCH for transactional.id tx-0', { reason: 'producer-epoch', transactionalId: 'tx-0' });
  }
}

/** Thirty records of three keys from `from`, one output each. */
const thirty = (from: number) => Array.from({ length: 30 }, (_, i) => ({ offset: from + i, key: `k${i % 3}`, value: { n: 1 } }));

/** The memory stores with an output sender, standing in for Kafka (the runtime does not care). */
function memoryWithOutputs(sent: InMemoryOutputSender): PersistenceBackend<unknown, unknown> {
  const snapshots = new InMemorySnapshotStore<unknown>();
  return {
    forPartition: async (o) =>
      new StorePartitionPersistence({ partition: { topic: o.topic, partition: o.partition }, mode: 'snapshots', snapshots, committer: o, outputs: sent }),
    close: async () => {},
  };
}

/** The memory backend, recording each partition's persistence built (the fence, in the Kafka backend) and closed, in order. */
function recordingBackend(flow = definition) {
  const inner = memoryBackend(flow);
  const events: string[] = [];
  const backend: PersistenceBackend<unknown, unknown> = {
    forPartition: async (o) => {
      events.push(`fence ${o.topic}-${o.partition} g${o.assigned.generationId}`);
      const p = await inner.forPartition(o);
      return Object.assign(Object.create(p), { close: async () => void events.push(`close ${o.topic}-${o.partition} g${o.assigned.generationId}`) });
    },
    close: () => inner.close(),
  };
  return { backend, events };
}

function setup(flow = definition, backend?: PersistenceBackend<unknown, unknown>, reassertAfterMs?: number, recoverAtJoin?: boolean) {
  const consumer = new FakeFlowConsumer();
  const signals = new RecordingSignals();
  const metrics = FlowMetrics.of();
  const runtime = new FlowRuntime({
    definition: flow,
    consumer,
    signals,
    taskQueue: 'tq-1',
    backend: backend ?? memoryBackend(flow),
    metrics,
    logger: silentLogger,
    maxHistoryEvents: 500,
    reassertAfterMs,
    recoverAtJoin,
  });
  return { consumer, signals, runtime, metrics };
}

const req = (owner: Owner, partition = 0) => ({ flow: 'counts', topic: 't', partition, owner });
const settle = () => new Promise((r) => setImmediate(r));

describe('FlowRuntime (fake consumer and signals)', () => {
  let rt: ReturnType<typeof setup>;

  /** Replaces the runtime with one folding `flow` on t-0 as member-1 (generation 1), its outputs going to `sender`. */
  async function foldingWithOutputs(flow: typeof definition, sender: InMemoryOutputSender) {
    await rt.runtime.stop(10);
    rt = setup(flow, memoryWithOutputs(sender));
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    return { owner, folding: driveFolding(rt.runtime.startFolding(req(owner))) };
  }
  beforeEach(async () => {
    rt = setup();
    await rt.runtime.start();
  });
  afterEach(async () => {
    await rt.runtime.stop(10);
    jest.restoreAllMocks();
  });

  test('a join pauses every assigned partition and signals each partition workflow with this process as owner', async () => {
    rt.consumer.join(3, { t: [0, 1] });
    await settle();
    expect([...rt.consumer.paused].sort()).toEqual(['t-0', 't-1']);
    expect(rt.signals.assignedCalls.map(([input, owner]) => [input.partition, input.persistEveryMs, input.limits, owner])).toEqual([
      [0, 1, { maxHistoryEvents: 500, unownedAfterMs: 30_000 }, { generation: 3, memberId: 'member-1', taskQueue: 'tq-1', foldAwaitsRecovery: true }],
      [1, 1, { maxHistoryEvents: 500, unownedAfterMs: 30_000 }, { generation: 3, memberId: 'member-1', taskQueue: 'tq-1', foldAwaitsRecovery: true }],
    ]);
  });

  test('a partition new here starts recovering at the join (fenced, committed offset and state read); the recover activity of that owner takes it over', async () => {
    const { backend, events } = recordingBackend();
    await rt.runtime.stop(10);
    rt = setup(definition, backend);
    await rt.runtime.start();
    rt.consumer.committed.set('t-0', '5');
    let release = () => {};
    rt.consumer.committedReadGate = new Promise<void>((r) => (release = r));
    rt.consumer.join(1, { t: [0, 1] });
    await settle();
    // Fenced at the join, before any activity; nothing installed or folded yet.
    expect(events).toEqual(['fence t-0 g1', 'fence t-1 g1']);
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    expect(() => driveFolding(rt.runtime.startFolding(req(owner)))).toThrow(/was not recovered/);
    const recovering = rt.runtime.recover({ ...req(owner), recovery: 'run/1' });
    await settle();
    expect(rt.runtime.recoveryDone({ ...req(owner), afterRecovery: 'run/1' })).toBe('waiting');
    release();
    await expect(recovering).resolves.toMatchObject({ fromMemory: false, committedOffset: '5' });
    expect(rt.runtime.recoveryDone({ ...req(owner), afterRecovery: 'run/1' })).toBe('done');
    expect(events).toEqual(['fence t-0 g1', 'fence t-1 g1']); // taken over, not recovered again
    expect(rt.consumer.seeks).toEqual([{ topic: 't', partition: 0, offset: '5' }]);
    expect(rt.consumer.paused.has('t-0')).toBe(true); // until its fold loop starts
    driveFolding(rt.runtime.startFolding(req(owner)));
    expect(await rt.consumer.deliver('t', 0, [{ offset: 5, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: '5' });

    // The activity's retry (a second recover of the same owner) recovers afresh: taken over once only.
    await rt.runtime.recover(req(owner, 1));
    await rt.runtime.recover(req(owner, 1));
    expect(events).toEqual(['fence t-0 g1', 'fence t-1 g1', 'fence t-1 g1']);
  });

  test('a recovery started at a join and not taken over is dropped (its persistence closed) at the next join, and not started where the engine is kept', async () => {
    const { backend, events } = recordingBackend();
    await rt.runtime.stop(10);
    rt = setup(definition, backend);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0, 1] });
    await settle();
    // Generation 2 before any activity of generation 1: t-0 again (a new recovery), t-1 gone.
    rt.consumer.join(2, { t: [0] });
    await settle();
    await settle();
    expect(events.slice(0, 2)).toEqual(['fence t-0 g1', 'fence t-1 g1']);
    expect(events.slice(2).sort()).toEqual(['close t-0 g1', 'close t-1 g1', 'fence t-0 g2']);
    // An activity of generation 1 is refused; generation 2's takes its own.
    await expect(rt.runtime.recover(req({ generation: 1, memberId: 'member-1', taskQueue: 'tq-1' }))).rejects.toThrow(StaleGenerationError);
    const g2 = { generation: 2, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(g2));
    expect(events.filter((e) => e.startsWith('fence'))).toHaveLength(3);
    // Generation 3 keeps generation 2's engine in memory: no recovery at the join.
    driveFolding(rt.runtime.startFolding(req(g2)));
    rt.consumer.join(3, { t: [0] });
    await settle();
    expect(events.filter((e) => e.startsWith('fence'))).toHaveLength(3);
    await expect(rt.runtime.recover({ ...req({ ...g2, generation: 3 }), keepFromGeneration: 2 })).resolves.toMatchObject({ fromMemory: true });
  });

  test('recoverAtJoin false: the recovery starts with its activity', async () => {
    const { backend, events } = recordingBackend();
    await rt.runtime.stop(10);
    rt = setup(definition, backend, undefined, false);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    await settle();
    expect(events).toEqual([]);
    await rt.runtime.recover(req({ generation: 1, memberId: 'member-1', taskQueue: 'tq-1' }));
    expect(events).toEqual(['fence t-0 g1']);
  });

  test('activities of another generation, member or partition are refused', async () => {
    rt.consumer.join(2, { t: [0] });
    await expect(rt.runtime.recover(req({ generation: 1, memberId: 'member-1', taskQueue: 'tq-1' }))).rejects.toThrow(StaleGenerationError);
    await expect(rt.runtime.recover(req({ generation: 2, memberId: 'someone-else', taskQueue: 'tq-1' }))).rejects.toThrow(StaleGenerationError);
    await expect(rt.runtime.recover(req({ generation: 2, memberId: 'member-1', taskQueue: 'tq-1' }, 1))).rejects.toThrow(/not assigned to this process/);
    expect(() => driveFolding(rt.runtime.startFolding(req({ generation: 2, memberId: 'member-1', taskQueue: 'tq-1' })))).toThrow(/was not recovered/);
  });

  test('recover, fold, persist: from the committed offset, folding only what it is given, committing through the group', async () => {
    rt.consumer.committed.set('t-0', '5');
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    const recovered = await rt.runtime.recover(req(owner));
    expect(recovered).toMatchObject({ fromMemory: false, committedOffset: '5' });
    expect(rt.consumer.seeks).toEqual([{ topic: 't', partition: 0, offset: '5' }]);
    expect(rt.consumer.paused.has('t-0')).toBe(true);

    // Not folding yet: a batch fetched now is paused back, nothing resolved (nothing skipped).
    expect(await rt.consumer.deliver('t', 0, [{ offset: 5, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: undefined, pausedByBatch: true });

    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    expect(rt.consumer.paused.has('t-0')).toBe(false);
    const batch = await rt.consumer.deliver('t', 0, [
      { offset: 5, key: 'a', value: { n: 1 } },
      { offset: 6, key: 'b', value: { n: 10 } },
      { offset: 7, key: 'a', value: { n: 2 } },
    ], '9');
    expect(batch).toEqual({ resolved: '7', pausedByBatch: false, heartbeats: 1 });
    expect(folding.poll()).toMatchObject({ running: true, progress: { position: '8', highWatermark: '9' } });

    await new Promise((r) => setTimeout(r, 5)); // past persistEvery (1 ms)
    expect(rt.runtime.persistReadiness(req(owner))).toBe('persist');
    const persisted = await rt.runtime.persist(req(owner));
    expect(persisted).toMatchObject({ persistedKeys: 2, committedOffset: '8', liveKeys: 2, logEndOffset: '9', lag: 1 });
    expect(rt.consumer.commits).toEqual([{ topic: 't', partition: 0, offset: '8' }]);
  });

  test('partitionFigures (the scrape-time gauges): recovering until recovered, then state, lag and commit lag of the current generation', async () => {
    // persistEvery 1 s: the first reading comes long before the first periodic persist could (with
    // 1 ms, a busy machine let the cadence persist between the fold and the reading).
    await rt.runtime.stop(10);
    rt = setup(persistingEverySecond);
    await rt.runtime.start();
    rt.consumer.committed.set('t-0', '5');
    rt.consumer.join(1, { t: [0, 1] });
    // The recoveries started at the join may still run: without an engine, a partition is recovering.
    expect(rt.runtime.partitionFigures().map((f) => f.partition).sort()).toEqual([0, 1]);
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    await rt.consumer.deliver('t', 0, [
      { offset: 5, key: 'a', value: { n: 1 } },
      { offset: 6, key: 'b', value: { n: 10 } },
    ], '10');
    const t0 = rt.runtime.partitionFigures().find((f) => f.partition === 0);
    // Position 7, log end 10, committed 5.
    expect(t0).toEqual({ topic: 't', partition: 0, state: 'running', lag: 3, commitLag: 2 });
    await new Promise((r) => setTimeout(r, 1_050)); // past persistEvery: the periodic persist runs or has run
    await rt.runtime.persist(req(owner));
    expect(rt.runtime.partitionFigures().find((f) => f.partition === 0)).toMatchObject({ lag: 3, commitLag: 0 });
    // Revoked: no longer folding here.
    await rt.consumer.revoke();
    expect(rt.runtime.partitionFigures().find((f) => f.partition === 0)?.state).toBe('revoked');
    expect(folding.poll()).toMatchObject({ running: false });
  });

  test('a fold loop scheduled with its recovery waits for that recovery, not an earlier engine or a later recovery', async () => {
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1', foldAwaitsRecovery: true };
    const loop = (afterRecovery: string) => ({ ...req(owner), afterRecovery });
    expect(rt.runtime.recoveryDone(loop('run/1'))).toBe('waiting');
    await rt.runtime.recover({ ...req(owner), recovery: 'run/1' });
    expect(rt.runtime.recoveryDone(loop('run/1'))).toBe('done');
    // A retry on the same owner: the engine of run/1 is installed, but the loop of run/2 waits for its own recovery.
    expect(rt.runtime.recoveryDone(loop('run/2'))).toBe('waiting');
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    rt.consumer.committedReadGate = gate;
    const second = rt.runtime.recover({ ...req(owner), recovery: 'run/2' });
    await settle();
    // run/2 has started: run/1's loop (cancelled, not yet told) must not start folding on the old engine.
    expect(rt.runtime.recoveryDone(loop('run/1'))).toBe('waiting');
    expect(rt.runtime.recoveryDone(loop('run/2'))).toBe('waiting');
    release();
    await second;
    expect(rt.runtime.recoveryDone(loop('run/2'))).toBe('done');
    // Another generation: refused as any activity of it.
    expect(() => rt.runtime.recoveryDone({ ...loop('run/2'), owner: { ...owner, generation: 2 } })).toThrow(StaleGenerationError);
  });

  test('a persist that comes before the fold loop has started persists (the partition is recovered here): not a stale generation', async () => {
    // The workflow schedules the fold loop and the first persist together; on a busy worker the
    // persist's delay ran out first and the refusal left the partition `fenced` on its only owner.
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    expect(rt.runtime.persistReadiness(req(owner))).toBe('persist');
    await expect(rt.runtime.persist(req(owner))).resolves.toMatchObject({ persistedKeys: 0, committedOffset: '0' });
    // Then the fold loop starts as usual.
    driveFolding(rt.runtime.startFolding(req(owner)));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }]);
    await new Promise((r) => setTimeout(r, 5));
    expect(await rt.runtime.persist(req(owner))).toMatchObject({ persistedKeys: 1, committedOffset: '1' });
    // Not recovered for the current generation (a rejoin since): still refused.
    rt.consumer.join(2, { t: [0] });
    await expect(rt.runtime.persist(req({ ...owner, generation: 2 }))).rejects.toThrow(StaleGenerationError);
  });

  test('the next persist is due persistEvery after the last one started here, not after its activity started', async () => {
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    driveFolding(rt.runtime.startFolding(req(owner)));
    expect(rt.runtime.lastPersistAt(req(owner))).toBeUndefined(); // freshly recovered: wait a whole persistEvery
    const before = Date.now();
    await new Promise((r) => setTimeout(r, 5)); // past persistEvery (1 ms): the periodic persist ran, by its timer or by this one
    await rt.runtime.persist(req(owner));
    const at = rt.runtime.lastPersistAt(req(owner))!;
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(rt.runtime.lastPersistAt(req({ ...owner, generation: 2 }))).toBeUndefined(); // another generation's
    // A new recovery starts the cadence over.
    rt.consumer.join(2, { t: [0] });
    await rt.runtime.recover(req({ ...owner, generation: 2 }));
    expect(rt.runtime.lastPersistAt(req({ ...owner, generation: 2 }))).toBeUndefined();
  });

  test('a big batch is folded in slices, the event loop served between them', async () => {
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    const positions: string[] = [];
    const sampler = setInterval(() => positions.push(String(folding.poll().progress.position)), 0);
    const records = Array.from({ length: 7_000 }, (_, i) => ({ offset: i, key: `k${i % 10}`, value: { n: 1 } }));
    const batch = await rt.consumer.deliver('t', 0, records);
    clearInterval(sampler);
    expect(batch).toMatchObject({ resolved: '6999', pausedByBatch: false });
    expect(folding.poll().progress.position).toBe('7000');
    // Timers ran while the batch was being folded, and saw it part way.
    expect(positions.some((p) => Number(p) > 0 && Number(p) < 7000)).toBe(true);
  });

  test('a revoke flushes (flushOnRevoke) under the generation given up, signals the workflow with the flush, and then persists are skipped', async () => {
    await rt.runtime.stop(10);
    rt = setup(flushingOnRevoke);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 4 } }]);
    expect(rt.runtime.persistReadiness(req(owner))).toBe('persist');
    expect((await rt.runtime.persist(req(owner))).persistedKeys).toBe(0); // not due for a minute

    await rt.consumer.revoke();
    expect(rt.signals.revokedCalls).toHaveLength(1);
    const [ref, signal] = rt.signals.revokedCalls[0]!;
    expect(ref).toEqual({ flow: 'counts', topic: 't', partition: 0 });
    expect(signal).toMatchObject({ generation: 1, memberId: 'member-1', reason: 'revoke', flushed: { persistedKeys: 1, committedOffset: '1' } });
    expect(rt.runtime.persistReadiness(req(owner))).toBe('skip');
    expect(folding.poll()).toMatchObject({ running: false, settling: false });

    // The next generation keeps the partition here: the old generation's report still ends quietly
    // (the workflow was told), the new one's persists, and one of a generation never revoked here is stale.
    rt.consumer.join(2, { t: [0] });
    expect(rt.runtime.persistReadiness(req(owner))).toBe('skip');
    const next = { ...owner, generation: 2 };
    await rt.runtime.recover({ ...req(next), keepFromGeneration: 1 });
    expect(rt.runtime.persistReadiness(req(next))).toBe('persist');
    expect(() => rt.runtime.persistReadiness(req({ ...owner, generation: 3 }))).toThrow(/generation 3/);
  });

  test('cooperative: a kept partition goes on under its ownership generation (no pause, no signal, its activities valid); a moved one is flushed, signalled under its own, and its late report skipped once dropped', async () => {
    await rt.runtime.stop(10);
    rt = setup(flushingOnRevoke);
    await rt.runtime.start();
    rt.consumer.joinCooperative(1, { t: [0, 1] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    for (const p of [0, 1]) await rt.runtime.recover(req(owner, p));
    const folding = [0, 1].map((p) => driveFolding(rt.runtime.startFolding(req(owner, p))));
    for (const p of [0, 1]) await rt.consumer.deliver('t', p, [{ offset: 0, key: 'a', value: { n: 4 } }]);
    const assignedBefore = rt.signals.assignedCalls.length;
    rt.consumer.paused.clear();

    // Generation 2 keeps 0 here and takes 1 away (to no one until the next round).
    rt.consumer.joinCooperative(2, { t: [0] }, { t: [1] });
    expect(rt.signals.assignedCalls).toHaveLength(assignedBefore);
    expect(rt.consumer.paused.size).toBe(0);
    expect(rt.runtime.persistReadiness(req(owner, 0))).toBe('persist');
    expect(await rt.consumer.deliver('t', 0, [{ offset: 1, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: '1', pausedByBatch: false });
    expect(folding[0]!.poll()).toMatchObject({ running: true });

    await rt.consumer.revokeIncremental();
    expect(rt.signals.revokedCalls).toHaveLength(1);
    const [ref, signal] = rt.signals.revokedCalls[0]!;
    expect(ref).toEqual({ flow: 'counts', topic: 't', partition: 1 });
    expect(signal).toMatchObject({ generation: 1, memberId: 'member-1', reason: 'revoke', flushed: { persistedKeys: 1 } });
    expect(folding[1]!.poll()).toMatchObject({ running: false });

    // The second round: 1 is gone from this process; its workflow's late report ends quietly.
    rt.consumer.joinCooperative(3, { t: [0] });
    expect(rt.runtime.persistReadiness(req(owner, 1))).toBe('skip');
    expect(rt.runtime.persistReadiness(req(owner, 0))).toBe('persist');
    expect(folding[0]!.poll()).toMatchObject({ running: true });
    expect(() => rt.runtime.persistReadiness(req({ ...owner, generation: 3 }, 0))).toThrow(StaleGenerationError);
  });

  test('outputEvery: keys with pending outputs are persisted in-process (not waiting for persistEvery), reported with the next workflow persist', async () => {
    const sent = new InMemoryOutputSender();
    const { owner } = await foldingWithOutputs(alerting, sent);
    await rt.consumer.deliver('t', 0, [
      { offset: 0, key: 'a', value: { n: 4 } },
      { offset: 1, key: 'b', value: { n: 12 } },
      { offset: 2, key: 'a', value: { n: 7 } },
    ]);
    expect(sent.sent).toHaveLength(0);
    const deadline = Date.now() + 2_000;
    while (sent.sent.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(sent.sent.map((o) => [o.key, String(o.value)]).sort()).toEqual([['a', '11'], ['b', '12']]);
    expect(rt.consumer.commits).toEqual([{ topic: 't', partition: 0, offset: '3' }]); // with the outputs' keys
    expect(rt.signals.assignedCalls).toHaveLength(1); // nothing went through the workflow

    // The workflow's next persist (persistEvery) reports what the in-process persists landed, once.
    expect(await rt.runtime.persist(req(owner))).toMatchObject({ persistedKeys: 2, outputs: 2 });
    expect((await rt.runtime.persist(req(owner))).outputs).toBeUndefined();
  });

  test('the outputs flush runs the key timers once per tick (not again in the persist it starts)', async () => {
    await rt.runtime.stop(10);
    const sent = new InMemoryOutputSender();
    const timers = jest.spyOn(PartitionFlow.prototype, 'triggerTimers');
    const looked = jest.spyOn(PartitionFlow.prototype, 'outputsDue');
    try {
      rt = setup(alerting, memoryWithOutputs(sent));
      await rt.runtime.start();
      rt.consumer.join(1, { t: [0] });
      const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
      await rt.runtime.recover(req(owner));
      driveFolding(rt.runtime.startFolding(req(owner)));
      await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 12 } }]);
      const deadline = Date.now() + 2_000;
      while (sent.sent.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(sent.sent).toHaveLength(1); // an outputs persist ran
      // Each tick: the timers once, then the outputs check; the flush it started added no timer run.
      // (The one batch delivered looked once more, after its slice.)
      expect(looked.mock.calls.length).toBeGreaterThan(1);
      expect(timers.mock.calls.length).toBe(looked.mock.calls.length - 1);
    } finally {
      timers.mockRestore();
      looked.mockRestore();
    }
  });

  test('maxPendingOutputs: a batch that finds the partition full waits for an outputs persist before folding more; every output lands once, in order', async () => {
    const sent = new InMemoryOutputSender();
    await foldingWithOutputs(echoing, sent);
    const { held, restore } = recordPendingOutputs();
    try {
      for (let b = 0; b < 10; b++) {
        expect(await rt.consumer.deliver('t', 0, thirty(b * 30))).toMatchObject({ resolved: String(b * 30 + 29), pausedByBatch: false });
      }
    } finally {
      restore();
    }
    // Without the bound it would hold all 300 (outputEvery is 10 min): never more than the bound plus a batch.
    expect(held).toHaveLength(10);
    expect(Math.max(...held)).toBeLessThanOrEqual(50 + 30);
    expect(sent.sent.length).toBeGreaterThanOrEqual(300 - (50 + 30));
    // What is still pending (outputEvery is 10 min) lands with the flush of a graceful stop.
    await rt.runtime.stop(10);
    expect(rt.consumer.commits.at(-1)).toEqual({ topic: 't', partition: 0, offset: '300' });
    const offsets = sent.sent.map((o) => Number(String(o.value)));
    expect([...offsets].sort((a, b) => a - b)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    for (const key of ['k0', 'k1', 'k2']) {
      const ofKey = sent.sent.filter((o) => o.key === key).map((o) => Number(String(o.value)));
      expect(ofKey).toEqual([...ofKey].sort((a, b) => a - b));
    }
  });

  test('maxPendingOutputs: an outputs persist that fails stops the partition; the waiting batch ends there, nothing folded past it', async () => {
    const sender = new FailingLaterSender();
    const { owner, folding } = await foldingWithOutputs(echoing, sender);
    await rt.consumer.deliver('t', 0, thirty(0)); // 30 held: half the bound, an outputs persist starts (its send waits)
    const deadline = Date.now() + 2_000;
    while (sender.sends === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(sender.sends).toBe(1); // started at half the bound, not at the bound
    await rt.consumer.deliver('t', 0, thirty(30)); // 60 held: full
    const third = rt.consumer.deliver('t', 0, thirty(60)); // waits for that persist
    await new Promise((r) => setTimeout(r, 50));
    expect(folding.poll().progress.position).toBe('60');
    sender.fail();
    expect(await third).toMatchObject({ resolved: undefined, pausedByBatch: true });
    const waited = (await rt.metrics.outputsWait.get()).values.reduce((n, v) => n + v.value, 0);
    expect(waited).toBeGreaterThanOrEqual(0.04); // the third batch's wait, on kafka_flow_outputs_wait_seconds_total
    expect(folding.poll()).toMatchObject({ running: false });
    expect(String(folding.poll().failure)).toMatch(/broker away/);
    expect(folding.poll().progress.position).toBe('60');
    expect(() => rt.runtime.persistReadiness(req(owner))).toThrow(/broker away/);
  });

  test('a lost producer epoch while the partition is still ours stays a failure to retry when the batch folding meanwhile meets it (not a fence: no newer owner would come)', async () => {
    // One output per record, due at half of 4,000: the outputs persist starts after the batch's
    // first slice of 2,000 and fails (its producer's epoch lost) before the second slice, which
    // then meets the engine's failure. Both must leave the same, classified failure.
    const emitting = echoingFlow(4_000);
    const { owner, folding } = await foldingWithOutputs(emitting, new EpochLostSender());
    const batch = Array.from({ length: 3_000 }, (_, i) => ({ offset: i, key: `k${i % 7}`, value: { n: 1 } }));
    await rt.consumer.deliver('t', 0, batch);
    const failure = folding.poll().failure;
    expect(failure).toBeInstanceOf(ProducerEpochLostError);
    expect(() => rt.runtime.persistReadiness(req(owner))).toThrow(ProducerEpochLostError);
  });

  /** Replaces the runtime with one folding `flow` (memory persistence) on t-0 as member-1 (generation 1). */
  async function foldingWith(flow: typeof definition) {
    await rt.runtime.stop(10);
    rt = setup(flow);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    return { owner, folding: driveFolding(rt.runtime.startFolding(req(owner))) };
  }
  const counting = (persistEvery: number, idleFlush: number | false) =>
    defineFlow<number, { n: number }>({
      name: 'counts',
      groupId: 'counts',
      topics: ['t'],
      fold: (s, r) => (s ?? 0) + r.value.n,
      timers: { persistPeriodically: { fireEvery: persistEvery, persistEvery } },
      idleFlush,
    }) as never;
  const until = async (what: () => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    while (!what() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  };

  test('persistEvery is timed in this process: the first periodic persist is persistEvery after the first batch folded (its keys due), then every persistEvery, no workflow persist needed', async () => {
    await foldingWith(counting(400, false));
    // The periodic persists started when each commit is made (counted then, not afterwards: a
    // loaded machine can stall past the next persistEvery before the test looks).
    const run = jest.spyOn(PartitionPersister.prototype, 'run');
    const periodicAtCommits: number[] = [];
    const commit = rt.consumer.commitOffsets.bind(rt.consumer);
    rt.consumer.commitOffsets = (offsets) => {
      periodicAtCommits.push(run.mock.calls.filter(([, reason]) => reason === 'periodic').length);
      return commit(offsets);
    };
    await new Promise((r) => setTimeout(r, 20)); // the first fetch comes a little after the fold loop started
    const folded = Date.now();
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }], '100'); // far from the log end
    await until(() => rt.consumer.commits.length > 0, 2_000);
    const first = Date.now() - folded;
    // Timed from the fold loop's start instead, the persist at 400 ms would find the key (created at
    // 20 ms) not due, and the next one, at 800 ms, would commit it: the commit must come from the
    // first periodic persist. (Counted, not timed: on a loaded machine a timer fires late.)
    expect(first).toBeGreaterThanOrEqual(390); // not before persistEvery
    expect(periodicAtCommits).toEqual([1]);
    expect(rt.consumer.commits).toEqual([{ topic: 't', partition: 0, offset: '1' }]);
    await rt.consumer.deliver('t', 0, [{ offset: 1, key: 'a', value: { n: 1 } }], '100');
    await until(() => rt.consumer.commits.length > 1, 2_000);
    expect(rt.consumer.commits.at(-1)).toEqual({ topic: 't', partition: 0, offset: '2' });
    expect(rt.signals.assignedCalls).toHaveLength(1); // nothing went through the workflow
  });

  test('the workflow persist reports what the in-process persists landed (once), and runs the periodic persist itself when it is due first', async () => {
    const { owner } = await foldingWith(counting(60_000, 1));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }, { offset: 1, key: 'b', value: { n: 1 } }]);
    await until(() => rt.consumer.commits.length > 0, 2_000); // the first batch, committed at once (takeover)
    expect(await rt.runtime.persist(req(owner))).toMatchObject({ persistedKeys: 2, committedOffset: '2' });
    expect(await rt.runtime.persist(req(owner))).toMatchObject({ persistedKeys: 0, committedOffset: '2' });
    expect(rt.consumer.commits).toHaveLength(1); // a report is no persist (and the idle flush found nothing dirty)
    const takeoverAt = rt.runtime.lastPersistAt(req(owner)); // the cadence counts from the takeover persist
    expect(takeoverAt).toBeDefined();
    await rt.runtime.persist(req(owner));
    expect(rt.runtime.lastPersistAt(req(owner))).toBe(takeoverAt); // no periodic persist yet (a minute)

    const { owner: o2 } = await foldingWith(counting(1, false));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }], '100');
    await new Promise((r) => setTimeout(r, 5));
    const before = rt.runtime.lastPersistAt(req(o2)) ?? 0;
    expect((await rt.runtime.persist(req(o2))).committedOffset).toBe('1');
    expect(rt.runtime.lastPersistAt(req(o2))).toBeGreaterThanOrEqual(before);
  });

  test('idle flush: a partition caught up with its log end and then quiet for idleFlush is persisted and committed; records still coming restart the wait; off, it waits for persistEvery', async () => {
    await foldingWith(counting(60_000, 400)); // a quiet time well above the trickle's 50 ms gaps, even on a loaded machine
    // The first batch after the recovery is committed at once (takeover), whatever the log end.
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }], '5');
    await until(() => rt.consumer.commits.length > 0, 2_000);
    const takeover = { topic: 't', partition: 0, offset: '1' };
    await rt.consumer.deliver('t', 0, [{ offset: 1, key: 'a', value: { n: 1 } }], '5'); // behind the log end: no flush
    await new Promise((r) => setTimeout(r, 600));
    expect(rt.consumer.commits).toEqual([takeover]);
    const caughtUp = Date.now();
    await rt.consumer.deliver('t', 0, [{ offset: 2, key: 'b', value: { n: 1 } }, { offset: 4, key: 'a', value: { n: 1 } }], '5'); // caught up
    await until(() => rt.consumer.commits.length > 1, 2_000);
    expect(Date.now() - caughtUp).toBeGreaterThanOrEqual(395);
    expect(rt.consumer.commits).toEqual([takeover, { topic: 't', partition: 0, offset: '5' }]);
    // A trickle faster than the quiet time: no flush until it stops (kafka-flow's cadence while records come).
    for (let offset = 5; offset < 10; offset++) {
      await rt.consumer.deliver('t', 0, [{ offset, key: 'a', value: { n: 1 } }]);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(rt.consumer.commits).toHaveLength(2);
    await until(() => rt.consumer.commits.length > 2, 2_000);
    expect(rt.consumer.commits).toEqual([takeover, { topic: 't', partition: 0, offset: '5' }, { topic: 't', partition: 0, offset: '10' }]);

    await foldingWith(counting(60_000, false)); // kafka-flow's cadence exactly: no takeover commit either
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }]);
    await new Promise((r) => setTimeout(r, 30));
    expect(rt.consumer.commits).toEqual([]);
  });

  test('idle flush: a failed one stops the partition here, as a failed periodic persist does', async () => {
    const sent = new DownSender();
    const flow = defineFlow<number, { n: number }>({
      name: 'counts',
      groupId: 'counts',
      topics: ['t'],
      fold: (s, r, ctx) => {
        ctx.emit({ topic: 'alerts', key: r.key, value: 1 });
        return (s ?? 0) + r.value.n;
      },
      persistence: { backend: 'kafka', transactional: true },
      outputTopics: ['alerts'],
      outputEvery: '10 min',
      timers: { persistPeriodically: { fireEvery: 60_000, persistEvery: 60_000 } },
    }) as never;
    const { folding, owner } = await foldingWithOutputs(flow, sent);
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }]);
    await until(() => folding.poll().failure !== undefined, 2_000);
    expect(String(folding.poll().failure)).toMatch(/broker away/);
    await expect(rt.runtime.persist(req(owner))).rejects.toThrow(/broker away/);
  });

  test('timer tick: every fireEvery, at most 1 s apart, and outputEvery / 2 for flows with outputs — emitted records or dead letters', () => {
    const base = { name: 'f', groupId: 'f', topics: ['t'], fold: (s: number | undefined) => s };
    const plain = defineFlow<number, unknown>({ ...base, timers: { persistPeriodically: { fireEvery: 60_000 } } });
    const fast = defineFlow<number, unknown>({ ...base, timers: { persistPeriodically: { fireEvery: 250 } } });
    const emitting = defineFlow<number, unknown>({ ...base, persistence: { backend: 'kafka', transactional: true }, outputTopics: ['o'], outputEvery: 600, timers: { persistPeriodically: { fireEvery: 60_000 } } });
    const deadLetters = defineFlow<number, unknown>({ ...base, persistence: { backend: 'kafka', transactional: true }, onFoldFailure: 'dead-letter', outputEvery: 600, timers: { persistPeriodically: { fireEvery: 60_000 } } });
    const tiny = defineFlow<number, unknown>({ ...base, persistence: { backend: 'kafka', transactional: true }, outputTopics: ['o'], outputEvery: 20 });
    expect([plain, fast, emitting, deadLetters, tiny].map((d) => hasOutputs(d as never))).toEqual([false, false, true, true, true]);
    expect([plain, fast, emitting, deadLetters, tiny].map((d) => timerTickMs(d as never))).toEqual([1000, 250, 300, 300, 100]);
  });

  test('same process, next generation: the in-memory state goes on from its position — not after a recovery was started since', async () => {
    rt.consumer.join(1, { t: [0] });
    const g1 = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(g1));
    const folding = driveFolding(rt.runtime.startFolding(req(g1)));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 4 } }, { offset: 1, key: 'a', value: { n: 1 } }]);
    rt.runtime.stopFolding(req(g1), folding.token);
    expect(rt.consumer.paused.has('t-0')).toBe(true);

    rt.consumer.join(2, { t: [0] });
    const g2 = { generation: 2, memberId: 'member-1', taskQueue: 'tq-1' };
    const kept = await rt.runtime.recover({ ...req(g2), keepFromGeneration: 1 });
    expect(kept).toMatchObject({ fromMemory: true, keys: 1 });
    expect(rt.consumer.seeks.at(-1)).toEqual({ topic: 't', partition: 0, offset: '2' });

    // A full recovery under generation 3 starts and is overtaken by generation 4, which asks to
    // keep generation 2's engine: refused (that recovery may have re-initialized the partition's
    // producer, fencing the engine's own), and a full recovery runs instead.
    rt.consumer.join(3, { t: [0] });
    const abandoned = rt.runtime.recover(req({ ...g2, generation: 3 }));
    rt.consumer.join(4, { t: [0] });
    await expect(abandoned).rejects.toThrow(StaleGenerationError);
    const g4 = { ...g2, generation: 4 };
    await expect(rt.runtime.recover({ ...req(g4), keepFromGeneration: 2 })).resolves.toMatchObject({ fromMemory: false });
  });

  test('a full recovery on the same owner (the workflow lost track of its fold loop) stops the engine it replaces before it reads: nothing of that engine is folded or persisted meanwhile', async () => {
    const flow = counting(30, false);
    // State reads after the first wait at a gate: the second recovery's read is held open.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reads = 0;
    const inner = memoryBackend(flow);
    const backend: PersistenceBackend<unknown, unknown> = {
      forPartition: async (o) => {
        const p = await inner.forPartition(o);
        return Object.assign(Object.create(p), {
          recover: () =>
            (async function* () {
              if (++reads > 1) await gate;
              yield* p.recover();
            })(),
        });
      },
      close: () => inner.close(),
    };
    await rt.runtime.stop(10);
    rt = setup(flow, backend);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    await rt.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }], '100');
    await until(() => rt.consumer.commits.length > 0, 2_000); // the engine persists every 30 ms

    await rt.consumer.deliver('t', 0, [{ offset: 1, key: 'a', value: { n: 1 } }], '100'); // dirty again
    const again = rt.runtime.recover(req(owner)); // no keepFromGeneration: a full recovery
    await until(() => reads === 2, 2_000);
    const commits = rt.consumer.commits.length;
    await new Promise((r) => setTimeout(r, 200)); // several persist periods of the old engine
    expect(rt.consumer.commits).toHaveLength(commits);
    expect(folding.poll().running).toBe(false);
    expect(rt.consumer.paused.has('t-0')).toBe(true);

    release();
    await expect(again).resolves.toMatchObject({ fromMemory: false });
  });

  test('a fold failure stops the partition here: the fold loop reports it and persists throw it', async () => {
    const failing = setup();
    await failing.runtime.start();
    failing.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await failing.runtime.recover(req(owner));
    const folding = driveFolding(failing.runtime.startFolding(req(owner)));
    // An undecodable value under the default `fail` policy.
    const bad = await failing.consumer.deliver('t', 0, [{ offset: 0, key: 'a', value: { n: 1 } }]);
    expect(bad.resolved).toBe('0');
    const payload = { batch: { topic: 't', partition: 0, highWatermark: '2', messages: [{ offset: '1', key: Buffer.from('a'), value: Buffer.from('{not json'), timestamp: '0', attributes: 0, headers: {} }] }, resolveOffset: () => undefined, pause: () => () => undefined, heartbeat: async () => undefined };
    await failing.consumer.deliverPayload(payload as never);
    expect(folding.poll().failure).toBeDefined();
    expect(() => failing.runtime.persistReadiness(req(owner))).toThrow();
    await failing.runtime.stop(10);
  });

  test('a partition held here but not folding has its assignment signalled again (a closed workflow starts afresh)', async () => {
    await rt.runtime.stop(10);
    rt = setup(definition, undefined, 300);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0, 1] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner, 1));
    driveFolding(rt.runtime.startFolding(req(owner, 1))); // partition 1 folds; partition 0's workflow never came
    await settle();
    expect(rt.signals.assignedCalls.map(([i]) => i.partition)).toEqual([0, 1]);
    await new Promise((r) => setTimeout(r, 200));
    expect(rt.signals.assignedCalls).toHaveLength(2); // not yet
    await new Promise((r) => setTimeout(r, 400));
    const again = rt.signals.assignedCalls.slice(2);
    expect(again.map(([i, o]) => [i.partition, o.generation])).toEqual([[0, 1]]);
    // Before the signal, a look for a run stuck on a Temporal SDK state-machine error (terminated, if so).
    expect(rt.signals.unstickCalls).toEqual([0]);
  });

  test('a partition folding here but handed no batch while its log holds records past its position has its fetching resumed; an idle one is left alone', async () => {
    await rt.runtime.stop(10);
    rt = setup(definition, undefined, 300);
    await rt.runtime.start();
    rt.consumer.join(1, { t: [0, 1] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner, 0));
    await rt.runtime.recover(req(owner, 1));
    driveFolding(rt.runtime.startFolding(req(owner, 0)));
    driveFolding(rt.runtime.startFolding(req(owner, 1)));
    rt.consumer.logRanges.set('t-0', { start: 0, end: 40 }); // records past position 0 that never came
    rt.consumer.logRanges.set('t-1', { start: 0, end: 0 }); // idle: nothing to fetch
    rt.consumer.pause([{ topic: 't', partitions: [0, 1] }]); // a pause nothing undid
    await new Promise((r) => setTimeout(r, 100));
    expect(rt.consumer.paused.has('t-0')).toBe(true); // not yet
    await new Promise((r) => setTimeout(r, 500));
    expect(rt.consumer.paused.has('t-0')).toBe(false);
    expect(rt.consumer.paused.has('t-1')).toBe(true);
  });

  test('a join completing while the member stops (kafkajs finishing a rejoin) is neither signalled nor recovered: the leave reassigns it', async () => {
    const { backend, events } = recordingBackend();
    await rt.runtime.stop(10);
    rt = setup(definition, backend);
    await rt.runtime.start();
    let release!: () => void;
    const activity = rt.runtime.activity(() => new Promise<void>((r) => (release = r)));
    const stopped = rt.runtime.stop(5_000); // waits for the activity: the member is stopping meanwhile
    rt.consumer.join(2, { t: [0, 1] });
    await settle();
    expect(rt.signals.assignedCalls).toEqual([]);
    expect(events).toEqual([]); // no recovery started at the join (no fence, no persistence built)
    expect([...rt.consumer.paused].sort()).toEqual(['t-0', 't-1']); // and nothing fetched for them
    release();
    await activity;
    await stopped;
  });

  test('a graceful stop leaves the group (revoke signalled as shutdown) and waits for running activities', async () => {
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    driveFolding(rt.runtime.startFolding(req(owner)));
    let release!: () => void;
    const activity = rt.runtime.activity(() => new Promise<void>((r) => (release = r)));
    const stopped = rt.runtime.stop(5_000);
    await settle();
    expect(rt.consumer.stopped).toBe(true);
    expect(rt.signals.revokedCalls.map(([, s]) => s.reason)).toEqual(['shutdown']);
    expect(rt.consumer.closed).toBe(false); // still waiting for the activity
    release();
    await activity;
    await stopped;
    expect(rt.consumer.closed).toBe(true);
  });
  test('a fetch out of range below the log start (retention deleted unfolded records): counted, seeks to the log start, nothing committed', async () => {
    rt.consumer.join(1, { t: [0] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    rt.consumer.logRanges.set('t-0', { start: 15, end: 20 });
    await rt.consumer.outOfRange('t', 0, '10');
    expect(rt.consumer.seeks.at(-1)).toEqual({ topic: 't', partition: 0, offset: '15' });
    expect(rt.consumer.commits).toEqual([]);
    const deleted = (await rt.metrics.inputDeletedUnfolded.get()).values.reduce((n, v) => n + v.value, 0);
    expect(deleted).toBe(5);
    expect(await rt.consumer.deliver('t', 0, [{ offset: 15, key: 'a', value: { n: 1 } }])).toMatchObject({ resolved: '15' });
    expect(folding.poll().failure).toBeUndefined();
  });

  test('a fetch out of range past the log end stops the partition with InputOffsetOutOfRangeError, paused, nothing committed; one in range now fetches again', async () => {
    rt.consumer.join(1, { t: [0, 1] });
    const owner = { generation: 1, memberId: 'member-1', taskQueue: 'tq-1' };
    await rt.runtime.recover(req(owner));
    await rt.runtime.recover(req(owner, 1));
    const folding = driveFolding(rt.runtime.startFolding(req(owner)));
    const other = driveFolding(rt.runtime.startFolding(req(owner, 1)));
    rt.consumer.logRanges.set('t-0', { start: 0, end: 10 });
    rt.consumer.logRanges.set('t-1', { start: 0, end: 10 });
    const seeks = rt.consumer.seeks.length;
    await rt.consumer.outOfRange('t', 0, '100');
    await rt.consumer.outOfRange('t', 1, '7');
    expect(folding.poll().failure).toBeInstanceOf(InputOffsetOutOfRangeError);
    expect(folding.poll().failure).toMatchObject({ code: 'INPUT_OFFSET_OUT_OF_RANGE', offset: 100, logStart: 0, logEnd: 10 });
    expect(rt.consumer.paused.has('t-0')).toBe(true);
    expect(other.poll().failure).toBeUndefined();
    expect(rt.consumer.seeks.length).toBe(seeks);
    expect(rt.consumer.commits).toEqual([]);
  });

  test('outOfRangeAction: below the log start skips what was deleted, past the end stops, within fetches again', () => {
    expect(outOfRangeAction(10, 15, 20)).toEqual({ action: 'skip-deleted', resumeAt: 15, deleted: 5 });
    expect(outOfRangeAction(21, 15, 20)).toEqual({ action: 'stop' });
    expect(outOfRangeAction(20, 15, 20)).toEqual({ action: 'fetch-again' });
    expect(outOfRangeAction(15, 15, 20)).toEqual({ action: 'fetch-again' });
  });
});
