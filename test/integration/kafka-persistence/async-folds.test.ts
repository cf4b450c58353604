// Async folds, pipelined (asyncConcurrency), on the real broker with transactional snapshots: while
// keys fold with random delays, every persist's committed offset is covered by the snapshots the
// broker holds (no record below the committed offset is missing from its key's snapshot); then the
// owner dies with folds in flight, a new owner recovers from the snapshots and the committed offset,
// and every key ends with each of its records exactly once, in offset order.
import { Registry } from 'prom-client';
import type { Fold } from '../../../flow/fold';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { timerPolicy } from '../../../flow/timers';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import type { KafkaPartitionPersistence } from '../../../persistence/kafka/kafka-partition-persistence';
import { kafkaScope, type RunningMember, unique } from '../../support/servers';
import { snapshotsOf } from './harness';

const RECORDS = 2_000;
const KEYS = 40;
const BATCH = 100;
const CRASH_AT = 1_200;

type Offsets = number[];
const codec = { encode: (n: number) => Buffer.from(String(n)), decode: (b: Buffer) => Number(b.toString()) };
/** Waits 0–4 ms (an I/O call), then appends the record's offset. */
const fold: Fold<Offsets, number> = async (state, record) => {
  await new Promise((resolve) => setTimeout(resolve, Number(record.offset) % 5));
  return [...(state ?? []), Number(record.offset)];
};
const keyOf = (i: number) => `k${(i * 13) % KEYS}`;
const messages = (from: number, to: number): InputMessage[] =>
  Array.from({ length: to - from }, (_, j) => ({ offset: String(from + j), key: keyOf(from + j), value: codec.encode(from + j), timestamp: '0' }));

describe('async folds, pipelined, on the real broker', () => {
  const kafka = kafkaScope('async-folds', { per: 'file' });
  let offsets: CommittedOffsets;
  let member: RunningMember;
  let backend: KafkaSnapshotBackend<Offsets, number>;
  let input: string;
  const groupId = unique('async-group');
  const snapshotTopic = kafka.topicName('async-snapshots');

  beforeAll(async () => {
    input = await kafka.topic('async-input', 1);
    offsets = new CommittedOffsets(kafka.client);
    kafka.defer(() => offsets.close());
    member = await kafka.member({ groupId }, input);
    await member.membership.waitForJoin(30_000);
    backend = new KafkaSnapshotBackend<Offsets, number>({
      client: kafka.client,
      flowName: 'async',
      groupId,
      inputTopic: input,
      snapshotTopic,
      transactionalIdPrefix: unique('async-app'),
      transactional: true,
      maxWritesPerTransaction: 16,
    });
    kafka.defer(() => backend.close());
  });

  async function owner(): Promise<{ flow: PartitionFlow<Offsets, number>; persistence: KafkaPartitionPersistence<Offsets, number>; from: number }> {
    const persistence = await backend.forPartition({ topic: input, partition: 0, generation: () => member.membership.current() });
    const committed = (await offsets.fetch(groupId, input, [0])).get(0) ?? '0';
    const flow = new PartitionFlow<Offsets, number>({
      flow: 'async',
      topic: input,
      partition: 0,
      assignedAt: committed,
      fold,
      codec,
      persistence,
      mode: 'snapshots',
      timers: timerPolicy({ persistPeriodically: { persistEvery: 0, fireEvery: 0 } }),
      asyncConcurrency: 8,
      metrics: FlowMetrics.of(new Registry()),
    });
    await flow.recover();
    return { flow, persistence, from: Number(committed) };
  }

  /** Broker truth: every record below the committed offset is in its key's snapshot. */
  async function checkCommittedIsCovered(): Promise<number> {
    const committed = Number((await offsets.fetch(groupId, input, [0])).get(0) ?? 0);
    const stored = await snapshotsOf(backend);
    for (let i = 0; i < committed; i++) {
      const state = stored.get(keyOf(i))?.state;
      if (!state?.includes(i)) throw new Error(`committed ${committed}, but record ${i} of ${keyOf(i)} is not in its snapshot (${JSON.stringify(state)})`);
    }
    return committed;
  }

  it('never commits past a record still folding, and loses or repeats nothing through a crash mid-fold', async () => {
    const first = await owner();
    expect(first.from).toBe(0);
    const commits: number[] = [];
    for (let from = 0; from < CRASH_AT; from += BATCH) {
      const r = first.flow.handleBatch(messages(from, from + BATCH));
      if (r) await r; // pipelined: returns while keys still fold
      first.flow.triggerTimers();
      await first.flow.persist(Date.now(), 'periodic');
      commits.push(await checkCommittedIsCovered());
    }
    // Folds were still in flight at persists, and the commit moved on all the same.
    expect(commits[commits.length - 1]).toBeGreaterThan(0);
    expect(commits[commits.length - 1]).toBeLessThanOrEqual(CRASH_AT);

    // The owner dies with folds in flight (nothing flushed); the next one fences it and recovers.
    const second = await owner();
    expect(second.from).toBe(commits[commits.length - 1]);
    for (let from = second.from; from < RECORDS; from += BATCH) {
      const r = second.flow.handleBatch(messages(from, Math.min(from + BATCH, RECORDS)));
      if (r) await r;
    }
    await second.flow.drained();
    await second.flow.persist(Date.now(), 'shutdown');
    expect(await checkCommittedIsCovered()).toBe(RECORDS);

    const stored = await snapshotsOf(backend);
    for (let k = 0; k < KEYS; k++) {
      const key = `k${k}`;
      const expected = Array.from({ length: RECORDS }, (_, i) => i).filter((i) => keyOf(i) === key);
      expect(stored.get(key)?.state).toEqual(expected);
    }
    await first.flow.drained(); // the dead owner's folds end in its memory only
  }, 120_000);
});
