// The live state query's decisions with fake sources: which topic and partition, the owner's answer
// when it has an HTTP address and answers, the persisted snapshot (saying why) otherwise, 404s and
// bad input as typed errors; and the owner's answer's shape.
import type { Owner } from '../../../../activities/types';
import { KeyNotFoundError, KeyQueryError, type KeySources, type OwnerKeyAnswer, ownerAnswer, queryKey } from '../../../../workers/keys/key-query';
import { partitionOfKey } from '../../../../workers/keys/key-partition';

const flow = { name: 'sales', topics: ['orders'] };
const owner: Owner = { generation: 7, memberId: 'm-1', taskQueue: 'kafka-flow-temporal/sales/123-abc', httpAddress: 'http://127.0.0.1:9464' };
const live: OwnerKeyAnswer = {
  source: 'owner',
  flow: 'sales',
  topic: 'orders',
  partition: 1,
  key: 'berlin',
  state: { n: 2 },
  offset: '41',
  persisted: false,
  from: 'memory',
  committedOffset: '30',
  position: '42',
  owner: { generation: 7, memberId: 'm-1', httpAddress: 'http://127.0.0.1:9464' },
};

function sources(o: Partial<KeySources> = {}): KeySources & { asked: Array<[string, number]> } {
  const asked: Array<[string, number]> = [];
  return {
    asked,
    partitionCount: async () => 6,
    ownerOf: async (topic, partition) => {
      asked.push([topic, partition]);
      return { owner };
    },
    askOwner: async () => live,
    snapshot: async () => ({ offset: '20', state: { n: 1 } }),
    ...o,
  };
}

describe('queryKey', () => {
  test("asks the partition's owner, in the partition Kafka's default partitioner gives the key", async () => {
    const s = sources();
    expect(await queryKey(flow, { key: 'berlin' }, s)).toBe(live);
    expect(s.asked).toEqual([['orders', partitionOfKey('berlin', 6)]]);
  });

  test('a given partition overrides the partitioner; out of range or an unknown topic is a KeyQueryError', async () => {
    const s = sources();
    await queryKey(flow, { key: 'berlin', partition: 5 }, s);
    expect(s.asked).toEqual([['orders', 5]]);
    await expect(queryKey(flow, { key: 'b', partition: 6 }, s)).rejects.toThrow(new KeyQueryError('partition 6 is out of range: the topic has 6 partition(s)'));
    await expect(queryKey(flow, { key: 'b', topic: 'other' }, s)).rejects.toThrow(KeyQueryError);
    await expect(queryKey(flow, { key: 'b' }, sources({ partitionCount: async () => undefined }))).rejects.toThrow(/does not exist/);
  });

  test('a flow with several topics needs the topic; a flow with remapKey needs the partition', async () => {
    await expect(queryKey({ name: 'f', topics: ['a', 'b'] }, { key: 'k' }, sources())).rejects.toThrow(/reads several topics \(a, b\)/);
    expect((await queryKey({ name: 'f', topics: ['a', 'b'] }, { key: 'k', topic: 'b' }, sources())).source).toBe('owner');
    await expect(queryKey({ ...flow, remapKey: () => 'x' }, { key: 'k' }, sources())).rejects.toThrow(/remaps keys/);
    expect((await queryKey({ ...flow, remapKey: () => 'x' }, { key: 'k', partition: 0 }, sources())).source).toBe('owner');
  });

  test("the owner holds nothing for the key: KeyNotFoundError, the snapshot is not read", async () => {
    let read = false;
    const s = sources({
      askOwner: async () => undefined,
      snapshot: async () => {
        read = true;
        return { offset: '1', state: 1 };
      },
    });
    await expect(queryKey(flow, { key: 'nope' }, s)).rejects.toThrow(KeyNotFoundError);
    expect(read).toBe(false);
  });

  test('no live owner: the persisted snapshot, with the reason; none persisted either: KeyNotFoundError', async () => {
    const s = sources({ ownerOf: async () => ({ none: 'the partition is idle' }) });
    expect(await queryKey(flow, { key: 'berlin' }, s)).toMatchObject({ source: 'snapshot', state: { n: 1 }, offset: '20', persisted: true, reason: 'the partition is idle' });
    await expect(queryKey(flow, { key: 'berlin' }, { ...s, snapshot: async () => undefined })).rejects.toThrow(/no live owner \(the partition is idle\) and no persisted snapshot/);
  });

  test('an owner without an HTTP port: the snapshot, the reason naming OWNER_NO_HTTP\'s fix', async () => {
    const { httpAddress: _, ...noHttp } = owner;
    let asked = false;
    const s = sources({
      ownerOf: async () => ({ owner: noHttp }),
      askOwner: async () => {
        asked = true;
        return live;
      },
    });
    const answer = await queryKey(flow, { key: 'berlin' }, s);
    expect(asked).toBe(false);
    expect(answer).toMatchObject({ source: 'snapshot' });
    expect((answer as { reason: string }).reason).toMatch(/serves no HTTP port: start its workers with --metrics-port/);
  });

  test('an owner that does not answer: the snapshot, saying so', async () => {
    const answer = await queryKey(flow, { key: 'berlin' }, sources({ askOwner: async () => Promise.reject(new Error('fetch failed')) }));
    expect(answer).toMatchObject({ source: 'snapshot', reason: 'its owner at http://127.0.0.1:9464 did not answer: fetch failed' });
  });
});

describe('ownerAnswer', () => {
  const owned = { generation: 7, memberId: 'm-1', committedOffset: 30, position: 42 };
  test('offsets as text, the persisted flag and where it came from', () => {
    expect(ownerAnswer('sales', 'orders', 1, 'berlin', { ...owned, lookup: { from: 'memory', state: { n: 2 }, offset: 41, persisted: false } }, 'http://127.0.0.1:9464')).toEqual(live);
  });
  test('nothing, or a deleted key: undefined (404)', () => {
    expect(ownerAnswer('sales', 'orders', 1, 'b', { ...owned, lookup: undefined }, undefined)).toBeUndefined();
    expect(ownerAnswer('sales', 'orders', 1, 'b', { ...owned, lookup: { from: 'memory', state: undefined, offset: 40, persisted: true } }, undefined)).toBeUndefined();
  });
});
