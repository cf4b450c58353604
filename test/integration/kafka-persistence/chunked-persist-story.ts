/**
 * Persists of several chunks (transactions, or Cassandra batches) on the real servers, the way a
 * worker runs them: the fold goes on between a persist's chunks (an outputs or idle persist runs
 * while the batch keeps folding), and a later chunk can fail after an earlier one landed. After
 * owner A's persist, owner B recovers what landed and replays the input from the group's committed
 * offset, as the next owner after A's crash would; every key must then be what a plain fold of the
 * whole input gives. Shared by the Kafka and the Cassandra persistence tests.
 */
import { Registry } from 'prom-client';
import { discardingContext, type Fold } from '../../../flow/fold';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow, type PersistResult } from '../../../flow/partition-flow';
import type { PartitionPersistence, WriteBatch, WriteBatchResult } from '../../../flow/ports';
import type { InputMessage } from '../../../flow/record';
import { timerPolicy } from '../../../flow/timers';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { fillInput, type KafkaScope, kafkaScope, type RunningMember, unique } from '../../support/servers';
import { textCodec } from './harness';

/** A key's count of `v` records; the third deletes it (a delete that depends on the state), and so does `del`. */
export interface Count {
  n: number;
}

export const countFold: Fold<Count, string> = (state, record) => {
  if (record.value === 'del') return undefined;
  const n = (state?.n ?? 0) + 1;
  return n >= 3 ? undefined : { n };
};

/** The input as [key, value] in offset order from 0. */
export type Input = ReadonlyArray<readonly [string, string]>;

export function messages(input: Input, from = 0, to = input.length): InputMessage[] {
  const out: InputMessage[] = [];
  for (let o = from; o < to; o++) out.push({ offset: String(o), key: input[o]![0], value: Buffer.from(input[o]![1]), timestamp: '0' });
  return out;
}

/** Every key's state after a plain fold of the whole input (absent: deleted or never folded). */
export function reference(input: Input): Map<string, Count> {
  const states = new Map<string, Count | undefined>();
  input.forEach(([key, value], offset) => {
    states.set(key, countFold(states.get(key), { topic: 't', partition: 0, offset: String(offset), key, value, timestamp: '0', headers: {} }, discardingContext) as Count | undefined);
  });
  const out = new Map<string, Count>();
  for (const [k, s] of states) if (s !== undefined) out.set(k, s);
  return out;
}

export interface StoryPorts {
  /** Owner A's or B's persistence for input partition 0 (a new one each call, as after an assignment). */
  persistence(owner: 'A' | 'B'): Promise<PartitionPersistence<Count, string>>;
  /** The group's committed offset of input partition 0 on the broker (0 if none). */
  committed(): Promise<number>;
}

export interface StoryHooks {
  /** Called before each write of A's last persist with its 0-based index; may fold or throw. */
  beforeWrite?(index: number, flow: PartitionFlow<Count, string>, batch: WriteBatch<Count, string>): void | Promise<void>;
}

export function ownerFlow(input: string, persistence: PartitionPersistence<Count, string>, assignedAt: number): PartitionFlow<Count, string> {
  return new PartitionFlow<Count, string>({
    flow: 'chunks',
    topic: input,
    partition: 0,
    assignedAt: String(assignedAt),
    fold: countFold,
    codec: textCodec,
    persistence,
    mode: 'snapshots',
    timers: timerPolicy({ persistPeriodically: {} }),
    metrics: FlowMetrics.of(new Registry()),
  });
}

/**
 * A folds `first` and persists it all, folds `second`, then persists again with `hooks` around
 * that persist's writes. Then A is gone; B recovers and replays from the committed offset.
 * Returns A's last persist and B's states beside the reference fold of `whole`.
 */
export async function ownerAThenB(
  topic: string,
  ports: StoryPorts,
  whole: Input,
  firstEnd: number,
  secondEnd: number,
  hooks: StoryHooks,
): Promise<{ last: PersistResult | Error; committed: number; got: Map<string, Count>; want: Map<string, Count> }> {
  const port = await ports.persistence('A');
  const write = port.write.bind(port);
  let armed = false;
  let index = 0;
  port.write = async (batch: WriteBatch<Count, string>): Promise<WriteBatchResult> => {
    if (armed && batch.writes.length > 0) await hooks.beforeWrite?.(index++, a, batch);
    return write(batch);
  };
  const a = ownerFlow(topic, port, 0);
  await a.recover();
  await a.handleBatch(messages(whole, 0, firstEnd));
  expect(await a.persist(Date.now(), 'shutdown')).toMatchObject({ failed: 0, committed: firstEnd });
  await a.handleBatch(messages(whole, firstEnd, secondEnd));
  armed = true;
  const last = await a.persist(Date.now(), 'shutdown').catch((err: Error) => err);

  const committed = await ports.committed();
  const b = ownerFlow(topic, await ports.persistence('B'), committed);
  await b.recover();
  await b.handleBatch(messages(whole, committed, whole.length));
  const got = new Map<string, Count>();
  for (const key of new Set(whole.map(([k]) => k))) {
    const s = b.stateOf(key);
    if (s !== undefined) got.set(key, s);
  }
  return { last, committed, got, want: reference(whole) };
}

/**
 * The fold goes on between chunks: while A's first chunk is in flight, k4 is deleted (planned as
 * a put of its state) and k5 revived (planned as its delete marker). At 2 writes a chunk the
 * persist is k0 k1 | k2 k3 | k4 k6 | k5.
 */
export const foldBetweenChunks = {
  whole: [
    ...['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6'].map((k) => [k, 'v'] as const),
    ...['k0', 'k1', 'k2', 'k3', 'k4', 'k6'].map((k) => [k, 'v'] as const),
    ['k5', 'del'],
    ['k4', 'del'],
    ['k5', 'v'],
  ] as Input,
  firstEnd: 7,
  secondEnd: 14,
  hooks: (): StoryHooks => ({
    beforeWrite: async (index, flow) => {
      if (index === 0) await flow.handleBatch(messages(foldBetweenChunks.whole, 14, 16));
    },
  }),
};

/**
 * Two keys deleted by their third record, purged (no marker) in a persist of one write a chunk:
 * k5's purge lands, k7's chunk fails. At the offset committed with k5's purge a replay folds k5
 * again from nothing unless the purge left a marker.
 */
export const purgeAcrossChunks = {
  whole: [
    ['k5', 'v'],
    ['k7', 'v'],
    ['k0', 'v'],
    ['k5', 'v'],
    ['k7', 'v'],
    ['k5', 'v'],
    ['k7', 'v'],
  ] as Input,
  firstEnd: 3,
  secondEnd: 7,
  hooks: (): StoryHooks => ({
    beforeWrite: (index) => {
      if (index === 1) throw new Error('the transaction of the second chunk failed');
    },
  }),
};

/** What a backend's persistence is made from: the test's client, input topic, group and member. */
export interface SuiteEnv {
  readonly client: KafkaClient;
  readonly input: string;
  readonly groupId: string;
  readonly member: RunningMember;
  /** The test's Kafka: topics to delete after it (`deleteAfter`, `topicName`), backends to close (`defer`). */
  readonly kafka: KafkaScope;
}

/**
 * The two stories as tests on the real broker: an input topic filled so committed offsets are in
 * range, a real group member whose commits (or transactions' offsets) the owners make, and the
 * group's committed offset read from the broker. `persistence(env, maxWrites)` gives an owner's
 * persistence at `maxWrites` key writes a chunk (a new one per call, as after an assignment).
 */
export function chunkedPersistSuite(name: string, persistence: (env: SuiteEnv, maxWrites: number) => () => Promise<PartitionPersistence<Count, string>>): void {
  const kafka = kafkaScope(name);
  let env: SuiteEnv;
  let offsets: CommittedOffsets;

  beforeEach(async () => {
    const { client } = kafka;
    offsets = new CommittedOffsets(client);
    kafka.defer(() => offsets.close());
    const input = await kafka.topic('input', 1);
    const groupId = unique('group');
    await fillInput(client, input, [0], 20);
    const member = await kafka.member({ groupId }, input);
    await member.membership.waitForJoin(30_000);
    env = { client, input, groupId, member, kafka };
  });

  const ports = (maxWrites: number): StoryPorts => {
    const open = persistence(env, maxWrites);
    return { persistence: open, committed: async () => Number((await offsets.fetch(env.groupId, env.input, [0])).get(0) ?? 0) };
  };

  it('a key deleted or revived between the chunks of one persist: each write carries its state as planned', async () => {
    const s = foldBetweenChunks;
    const { last, got, want } = await ownerAThenB(env.input, ports(2), s.whole, s.firstEnd, s.secondEnd, s.hooks());
    expect(Object.fromEntries(got)).toEqual(Object.fromEntries(want));
    expect(last).toMatchObject({ failed: 0 });
    expect(want.get('k5')).toEqual({ n: 1 });
  });

  it('deletes across chunks, a later chunk failing after a purge could land: never a replay from nothing', async () => {
    const s = purgeAcrossChunks;
    const { last, committed, got, want } = await ownerAThenB(env.input, ports(1), s.whole, s.firstEnd, s.secondEnd, s.hooks());
    expect(last).toMatchObject({ failed: 1 });
    expect(committed).toBeLessThan(s.whole.length);
    expect(Object.fromEntries(got)).toEqual(Object.fromEntries(want));
    expect(want.has('k5')).toBe(false);
  });
}
