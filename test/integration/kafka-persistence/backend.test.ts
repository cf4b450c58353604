// The backend's other duties on the real broker: the snapshot topic created right (or refused at
// start when it does not fit), a rolling deploy between caching and transactional mode with no
// migration, an unanswered commit whose outcome is learned before going on (and one learned only at
// the next write, which stops the partition rather than produce its outputs twice), inspect without a
// group, and dead letters inside the snapshot transaction.
import { Registry } from 'prom-client';
import { ManualClock } from '../../../flow/clock';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { SnapshotCommitTimeoutError } from '../../../kafka/errors';
import { PartitionReader, type ReadRecord } from '../../../kafka/partition-reader';
import { KafkaSnapshotBackend, type KafkaSnapshotBackendOptions } from '../../../persistence/kafka/backend';
import { DEAD_LETTER_HEADERS } from '../../../flow/poison';
import { SnapshotTopicMismatchError } from '../../../persistence/kafka/errors';
import { KafkaFlowBackend } from '../../../persistence/kafka/flow-backend';
import { kafkaScope, type RunningMember, sleep, unique } from '../../support/servers';
import { decodedSnapshot, snapshotsOf } from './harness';

describe('the Kafka snapshot backend on the real broker', () => {
  const kafka = kafkaScope('backend');
  let input: string;
  let groupId: string;
  let member: RunningMember | undefined;

  beforeEach(async () => {
    input = await kafka.topic('input', 3);
    groupId = unique('group');
    member = undefined;
  });

  /** A backend on `snapshotTopic`, closed after the test (a snapshot topic from kafka.topicName is deleted then). */
  function backend(o: Partial<KafkaSnapshotBackendOptions<string>> & { snapshotTopic: string }): KafkaSnapshotBackend<string> {
    const b = new KafkaSnapshotBackend<string>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, ...o });
    kafka.defer(() => b.close());
    return b;
  }

  async function joined(): Promise<RunningMember> {
    member ??= await kafka.member({ groupId }, input);
    await member.membership.waitForJoin(30_000);
    return member;
  }

  it('creates the snapshot topic compacted with the input topic\'s partition count, and refuses one that does not fit', async () => {
    const snapshotTopic = kafka.topicName('snapshots');
    await backend({ snapshotTopic }).ensureTopic();
    expect(await kafka.admin.describeTopic(snapshotTopic, ['cleanup.policy'])).toMatchObject({ partitions: 3, config: { 'cleanup.policy': 'compact' } });
    await backend({ snapshotTopic }).ensureTopic(); // an existing topic that fits is fine

    const fewer = kafka.topicName('snapshots');
    const deleting = kafka.topicName('snapshots');
    await kafka.admin.ensureTopics([
      { topic: fewer, partitions: 2, config: { 'cleanup.policy': 'compact' } },
      { topic: deleting, partitions: 3 },
    ]);
    await expect(backend({ snapshotTopic: fewer }).ensureTopic()).rejects.toThrow(/it has 2 partition\(s\), the input topic has 3/);
    const error = await backend({ snapshotTopic: deleting }).ensureTopic().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SnapshotTopicMismatchError);
    expect(error).toMatchObject({ code: 'SNAPSHOT_TOPIC_MISMATCH' });
    expect((error as Error).message).toMatch(/cleanup.policy is "delete"/);
  });

  it('rolls from caching to transactional mode and back with no migration (one record format)', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const committer = { commit: async (_tp: unknown, offset: number) => m.consumer.commitOffsets([{ topic: input, partition: 0, offset: String(offset) }]) };
    const caching = backend({ snapshotTopic, transactional: false });
    const c = await caching.forPartition({ topic: input, partition: 0, generation: () => m.membership.current(), committer });
    await c.write({ writes: [{ key: 'a', snapshot: { state: 'a1', offset: 1 } }, { key: 'b', snapshot: { state: 'b1', offset: 2 } }], commitOffset: 3 });

    const transactional = backend({ snapshotTopic, transactional: true, transactionalIdPrefix: unique('app') });
    const t = await transactional.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
    const recovered = new Map<string, unknown>();
    for await (const k of t.recover()) recovered.set(k.key, k.snapshot && decodedSnapshot(k.snapshot));
    expect(recovered).toEqual(new Map([['a', { state: 'a1', offset: 1 }], ['b', { state: 'b1', offset: 2 }]]));
    expect(t.committedOffset).toBe(3); // seeded from the consumer's commit
    await t.write({ writes: [{ key: 'b', delete: { offset: 4 } }, { key: 'c', snapshot: { state: 'c1', offset: 5 } }], commitOffset: 6 });

    const back = backend({ snapshotTopic, transactional: false });
    const again = await back.forPartition({ topic: input, partition: 0, generation: () => m.membership.current(), committer });
    const keys = new Map<string, unknown>();
    for await (const k of again.recover()) keys.set(k.key, k.snapshot ? decodedSnapshot(k.snapshot) : k.deleted);
    // b's delete left its marker (purged once the committed offset passes it).
    expect(keys).toEqual(new Map([['a', { state: 'a1', offset: 1 }], ['b', { offset: 4 }], ['c', { state: 'c1', offset: 5 }]]));
  });

  /**
   * A client whose transactional producers' commits get no answer in time: `late` — the broker
   * commits, its answer arrives after 2 s; `lost` — the commit request never goes out, so the
   * transaction stays open until the next producer's initialization aborts it.
   */
  function silentCommits(mode: 'late' | 'lost'): KafkaClient {
    const flaky = Object.create(kafka.client.kafka) as KafkaClient['kafka'];
    flaky.producer = (config) => {
      const producer = kafka.client.kafka.producer(config);
      if (!config?.transactionalId) return producer;
      const begin = producer.transaction.bind(producer);
      producer.transaction = async () => {
        const transaction = await begin();
        const commit = transaction.commit.bind(transaction);
        transaction.commit = () => (mode === 'late' ? commit().then(() => sleep(2_000)) : new Promise<void>(() => {}));
        return transaction;
      };
      return producer;
    };
    return { ...kafka.client, kafka: flaky };
  }

  it('an unanswered commit that landed: the producer is rebuilt, the outcome learned, the write succeeds', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const registry = new Registry();
    const b = backend({ snapshotTopic, client: silentCommits('late'), transactional: true, transactionalIdPrefix: unique('app'), commitTimeoutMs: 300, metrics: FlowMetrics.of(registry) });
    const p = await b.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
    const result = await p.write({ writes: [{ key: 'k', snapshot: { state: 'v1', offset: 7 } }], commitOffset: 8 });
    // sizes: each write's stored record, for a byte-bounded state cache.
    expect(result).toEqual({ statuses: ['applied'], committed: true, sizes: [expect.any(Number)] });
    expect(await p.write({ writes: [], commitOffset: 9 })).toEqual({ statuses: [], committed: true, sizes: [] });
    expect(p.stats.commitTimeouts).toBe(2);
    expect(await registry.getSingleMetricAsString('kafka_flow_snapshot_commit_timeouts_total')).toMatch(/outcome="committed"} 2/);
    const offsets = new CommittedOffsets(kafka.client);
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('9');
    } finally {
      await offsets.close();
    }
    expect((await snapshotsOf(b)).get('k')).toEqual({ offset: '7', state: 'v1' });
  });

  it('an unanswered commit that never happened: the rebuilt producer aborts it, the write fails, nothing landed', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const b = backend({ snapshotTopic, client: silentCommits('lost'), transactional: true, transactionalIdPrefix: unique('app'), commitTimeoutMs: 300 });
    const p = await b.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
    const error = await p.write({ writes: [{ key: 'k', snapshot: { state: 'v1', offset: 7 } }], commitOffset: 8 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SnapshotCommitTimeoutError);
    expect(p.stats.commitTimeouts).toBe(1);
    expect(p.fenced).toBeUndefined(); // not a rejection: the partition goes on
    expect(await p.read('k')).toBeUndefined();
    expect((await snapshotsOf(b)).size).toBe(0);
    const offsets = new CommittedOffsets(kafka.client);
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBeNull();
    } finally {
      await offsets.close();
    }
  });

  it('an unanswered commit that landed, learned only at the next write: that write stops the partition instead of producing its dead letter twice', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const deadLetterTopic = kafka.topicName('dead-letters');
    // Producer 1: the broker commits, the answer comes 2 s late; producer 2 (the rebuild that
    // would learn the outcome) cannot connect; producer 3 and later are fine.
    const flaky = Object.create(kafka.client.kafka) as KafkaClient['kafka'];
    let created = 0;
    flaky.producer = (config) => {
      const producer = kafka.client.kafka.producer(config);
      if (!config?.transactionalId) return producer;
      created++;
      if (created === 1) {
        const begin = producer.transaction.bind(producer);
        producer.transaction = async () => {
          const transaction = await begin();
          const commit = transaction.commit.bind(transaction);
          transaction.commit = () => commit().then(() => sleep(2_000));
          return transaction;
        };
      } else if (created === 2) {
        producer.connect = async () => {
          throw new Error('connect ECONNREFUSED (simulated)');
        };
      }
      return producer;
    };
    const prefix = unique('app');
    const b = backend({ snapshotTopic, client: { ...kafka.client, kafka: flaky }, transactional: true, transactionalIdPrefix: prefix, commitTimeoutMs: 300, deadLetterTopic });
    const p = await b.forPartition({ topic: input, partition: 1, generation: () => m.membership.current() });
    const letter = { topic: deadLetterTopic, key: Buffer.from('k'), value: Buffer.from('{bad'), headers: { [DEAD_LETTER_HEADERS.offset]: '7', [DEAD_LETTER_HEADERS.reason]: 'decode' } };
    await expect(p.write({ writes: [{ key: 'k', snapshot: { state: 'v1', offset: 7 }, outputs: [letter] }], commitOffset: 8 })).rejects.toThrow(/ECONNREFUSED/);
    // The engine hands the key back with its letter; the next write learns the first one landed.
    const error = await p.write({ writes: [{ key: 'k', snapshot: { state: 'v2', offset: 9 }, outputs: [letter] }], commitOffset: 10 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'COMMIT_LANDED_LATE', offset: 8, outputs: 1 });
    expect(created).toBe(3);

    const reader = new PartitionReader(kafka.client);
    const got: ReadRecord[] = [];
    try {
      await reader.read({ topic: deadLetterTopic, partition: 1, fromOffset: '0', stallTimeoutMs: 10_000, onRecords: (rs) => void got.push(...rs) });
    } finally {
      await reader.close();
    }
    expect(got.map((r) => String(r.key))).toEqual(['k']); // once
    // Recovering from what landed: the first write's state and offset.
    const again = backend({ snapshotTopic, transactional: true, transactionalIdPrefix: prefix, deadLetterTopic });
    const q = await again.forPartition({ topic: input, partition: 1, generation: () => m.membership.current() });
    const recovered = new Map<string, unknown>();
    for await (const k of q.recover()) recovered.set(k.key, k.snapshot && decodedSnapshot(k.snapshot));
    expect(recovered).toEqual(new Map([['k', { state: 'v1', offset: 7 }]]));
    expect(q.committedOffset).toBe(8);
  });

  it('inspects every input topic\'s snapshots without a group; a multi-topic flow gets a snapshot topic per input topic', async () => {
    const second = await kafka.topic('input', 1);
    const flow = new KafkaFlowBackend<string>({ client: kafka.client, flowName: 'f', groupId, topics: [input, second], transactional: false });
    kafka.defer(() => flow.close());
    for (const b of flow.backends.values()) kafka.deleteAfter(b.snapshotTopic);
    expect(flow.forTopic(second).snapshotTopic).toBe(`${groupId}-f-${second}-snapshots`);
    const commits: number[] = [];
    const committer = { commit: async (_tp: unknown, offset: number) => void commits.push(offset) };
    const p2 = await flow.forPartition({ topic: input, partition: 2, generation: 1, memberId: 'm', committer });
    await p2.write({ writes: [{ key: 'x', snapshot: { state: 'x2', offset: 11 } }], commitOffset: 12 });
    const q0 = await flow.forPartition({ topic: second, partition: 0, generation: 1, memberId: 'm', committer });
    await q0.write({ writes: [{ key: 'y', snapshot: { state: 'y0', offset: 3 } }], commitOffset: 4 });
    const seen = [];
    for await (const s of flow.readAll()) seen.push(s);
    expect(seen).toEqual([
      { topic: input, partition: 2, key: 'x', offset: '11', state: 'x2' },
      { topic: second, partition: 0, key: 'y', offset: '3', state: 'y0' },
    ]);
    expect(commits).toEqual([12, 4]);
    expect(() => new KafkaFlowBackend<string>({ client: kafka.client, flowName: 'f', groupId, topics: [input, second], snapshotTopic: 'one' })).toThrow(/cannot be set/);
  });

  it('a state-dependent delete keeps its dedupe: the marker survives a crash with the commit below it, and is purged once passed', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const prefix = unique('app');
    type Count = { n: number };
    const fold = (s: Count | undefined, r: { value: string }): Count | undefined => {
      const n = (s?.n ?? 0) + (r.value === 'inc' ? 1 : -1);
      return n === 0 ? undefined : { n };
    };
    const clock = new ManualClock(0);
    const flowOn = async (assignedAt: string) => {
      const b2 = new KafkaSnapshotBackend<Count, string>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic, transactional: true, transactionalIdPrefix: prefix });
      kafka.defer(() => b2.close());
      const persistence = await b2.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
      const flow = new PartitionFlow<Count, string>({
        flow: 'f', topic: input, partition: 0, assignedAt, fold, codec: { encode: (v) => Buffer.from(v), decode: (b) => b.toString() },
        persistence, mode: 'snapshots', timers: timerPolicy({ persistPeriodically: { fireEvery: '1 hour', persistEvery: '1 hour' } }), clock,
      });
      await flow.recover();
      return { flow, persistence };
    };
    const msgs = (from: number, kv: Array<[string, string]>) => kv.map(([k, v], i) => ({ offset: String(from + i), key: Buffer.from(k), value: Buffer.from(v), timestamp: '0' }));
    const input0 = msgs(0, [['a', 'inc'], ['h', 'inc'], ['a', 'dec'], ['a', 'inc']]);

    const first = await flowOn('0');
    await first.flow.handleBatch(input0.slice(0, 1));
    await first.flow.persist(clock.now(), 'shutdown'); // a = 1 at offset 0, committed 1
    await first.flow.handleBatch(input0.slice(1, 3)); // h holds 1 (not due); a deleted at offset 2
    const r = await first.flow.persist(clock.now(), 'periodic');
    expect(r).toMatchObject({ deleted: 1, committed: undefined }); // the marker landed; h keeps the commit at 1
    // "Crash" here: the next owner replays from 1 — a's offset-2 record must not hit an empty state.
    const second = await flowOn('1');
    expect(second.flow.stateOf('a')).toBeUndefined();
    await second.flow.handleBatch(input0.slice(1));
    expect(second.flow.stateOf('a')).toEqual({ n: 1 }); // without the marker: -1 +1 = 0, deleted
    expect(second.flow.stateOf('h')).toEqual({ n: 1 });
    await second.flow.persist(clock.now(), 'shutdown');
    // Once the commit has passed it, a delete leaves nothing behind (a tombstone, no marker).
    await second.flow.handleBatch(msgs(4, [['h', 'dec']]));
    await second.flow.persist(clock.now(), 'shutdown');
    const third = await flowOn('5');
    expect(new Map(third.flow.states())).toEqual(new Map([['a', { n: 1 }]]));
    const recovered: string[] = [];
    for await (const k of third.persistence.recover()) recovered.push(k.key);
    expect(recovered).toEqual(['a']);
  });

  it('dead letters travel in the snapshot transaction: they land with the key write, and a fenced transaction lands none', async () => {
    const m = await joined();
    const snapshotTopic = kafka.topicName('snapshots');
    const deadLetterTopic = kafka.topicName('dead-letters');
    const b = backend({ snapshotTopic, transactional: true, transactionalIdPrefix: unique('app'), deadLetterTopic });
    const p = await b.forPartition({ topic: input, partition: 2, generation: () => m.membership.current() });
    expect((await kafka.admin.describeTopic(deadLetterTopic))?.partitions).toBe(3); // created like the input topic
    const letter = {
      topic: deadLetterTopic,
      key: Buffer.from('k'),
      value: Buffer.from('{not json'),
      headers: { trace: 'abc', [DEAD_LETTER_HEADERS.offset]: '41', [DEAD_LETTER_HEADERS.reason]: 'decode' },
    };
    await p.write({ writes: [{ key: 'k', snapshot: { state: 'v', offset: 41 }, outputs: [letter] }], commitOffset: 42 });

    // A stale owner of the same partition (an older generation): fenced, and its dead letter with it.
    const stale = backend({ snapshotTopic, transactional: true, transactionalIdPrefix: unique('stale'), deadLetterTopic });
    const current = m.membership.current()!;
    const s2 = await stale.forPartition({ topic: input, partition: 2, generation: { generationId: current.generationId - 1, memberId: current.memberId } });
    const error = await s2.write({ writes: [{ key: 'x', snapshot: { state: 'w', offset: 43 }, outputs: [{ ...letter, key: Buffer.from('x') }] }], commitOffset: 44 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'FENCED' });

    const reader = new PartitionReader(kafka.client);
    const got: ReadRecord[] = [];
    try {
      await reader.read({ topic: deadLetterTopic, partition: 2, fromOffset: '0', stallTimeoutMs: 10_000, onRecords: (rs) => void got.push(...rs) });
    } finally {
      await reader.close();
    }
    expect(got.map((r) => String(r.key))).toEqual(['k']); // read_committed: the fenced one never shows
    expect(String(got[0]!.value)).toBe('{not json');
    const headers = Object.fromEntries(Object.entries(got[0]!.headers).map(([k, v]) => [k, String(v)]));
    expect(headers).toMatchObject({ trace: 'abc', [DEAD_LETTER_HEADERS.offset]: '41', [DEAD_LETTER_HEADERS.reason]: 'decode' });
    expect((await snapshotsOf(b, 2)).get('k')).toEqual({ offset: '41', state: 'v' });
    expect((await snapshotsOf(b, 2)).has('x')).toBe(false);
  });
});
