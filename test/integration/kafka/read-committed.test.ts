// read_committed on the real broker: the aborted-record leak of unpatched kafkajs (overlapping
// aborted transactions of two producers, ending in reverse order), the group-less partition
// reader up to a bound, and committed offsets read with require_stable.
import type { Producer } from 'kafkajs';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { PartitionReadStalledError } from '../../../kafka/errors';
import { decodeFetchResponse, FetchedRecord } from '../../../kafka/fetch-decoder';
import { createBatch, createCluster, type FetchPartitionData, type InternalBroker, ISOLATION, type RawMessage } from '../../../kafka/internals';
import { PartitionReader } from '../../../kafka/partition-reader';
import { closeAll, fillInput, kafkaScope, sleep, unique, waitFor } from '../../support/servers';

/**
 * kafkajs 2.2.4's filter as shipped (consumer/filterAbortedMessages.js before our patch), kept
 * here only to show the leak on real broker data: one aborted transaction entered per record,
 * in the broker's order (by end), not by first offset.
 */
function unpatchedFilter(messages: RawMessage[], aborted: Array<{ producerId: string; firstOffset: string }>) {
  const current = new Set<string>();
  if (!aborted.length) return messages;
  const remaining = [...aborted];
  return messages.filter((m) => {
    const next = remaining[0];
    if (next && BigInt(m.offset) >= BigInt(next.firstOffset)) {
      remaining.shift();
      current.add(next.producerId);
    }
    const { producerId, inTransaction } = m.batchContext;
    if (m.key && Buffer.from(m.key).equals(Buffer.from([0, 0, 0, 0]))) current.delete(producerId);
    else if (current.has(producerId) && inTransaction) return false;
    return true;
  });
}

/** One fetch of partition 0 from its start, as the broker answers it (decoded by `decodeResponse` when given). */
async function fetchFromStart(broker: InternalBroker, topic: string, isolationLevel: number, decodeResponse?: typeof decodeFetchResponse): Promise<FetchPartitionData> {
  const { responses } = await broker.fetch({
    isolationLevel,
    maxWaitTime: 100,
    minBytes: 1,
    maxBytes: 1 << 20,
    topics: [{ topic, partitions: [{ partition: 0, fetchOffset: '0', maxBytes: 1 << 20 }] }],
    ...(decodeResponse ? { decodeResponse } : {}),
  });
  return responses[0]!.partitions[0] as FetchPartitionData;
}

/** The control records (transaction markers) of the partition's log, read uncommitted. */
async function controlRecords(broker: InternalBroker, topic: string): Promise<number> {
  return (await fetchFromStart(broker, topic, ISOLATION.READ_UNCOMMITTED)).messages.filter((m) => m.isControlRecord).length;
}

function transactional(client: KafkaClient, id: string): Producer {
  return client.kafka.producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 1 });
}

describe('read_committed on the real broker', () => {
  const kafka = kafkaScope('rc');
  let topic: string;

  beforeEach(async () => {
    topic = await kafka.topic('rc', 1);
  });

  it('drops overlapping aborted transactions of two producers that unpatched kafkajs leaked', async () => {
    const p1 = transactional(kafka.client, unique('p1'));
    const p2 = transactional(kafka.client, unique('p2'));
    const p3 = transactional(kafka.client, unique('p3'));
    const cluster = createCluster(kafka.client, ISOLATION.READ_COMMITTED);
    const reader = new PartitionReader(kafka.client);
    const consumer = kafka.client.kafka.consumer({ groupId: unique('rc-group'), maxWaitTimeInMs: 200 });
    // The flow's group consumer opts in to our decoder (the kafkajs patch's fetchResponseDecoder).
    let ourDecodes = 0;
    const flowLike = kafka.client.kafka.consumer({
      groupId: unique('rc-group-ours'),
      maxWaitTimeInMs: 200,
      fetchResponseDecoder: (raw: Buffer, apiVersion: number) => {
        const decoded = decodeFetchResponse(raw, apiVersion);
        if (decoded) ourDecodes++;
        return decoded;
      },
    });
    try {
      await Promise.all([p1.connect(), p2.connect(), p3.connect()]);
      await cluster.connect();
      await cluster.addTargetTopic(topic);
      const leader = Object.keys(cluster.findLeaderForPartitions(topic, [0]))[0]!;
      const broker = await cluster.findBroker({ nodeId: leader });
      const t1 = await p1.transaction();
      const t2 = await p2.transaction();
      await t1.send({ topic, messages: [{ value: 'aborted-p1-a' }] }); // P1's transaction starts first
      await t2.send({ topic, messages: [{ value: 'aborted-p2-a' }] }); // P2's starts inside it
      await t1.send({ topic, messages: [{ value: 'aborted-p1-b' }] });
      await t2.send({ topic, messages: [{ value: 'aborted-p2-b' }] });
      await t2.abort(); // P2 ends first ...
      // EndTxn answers once the coordinator logged the abort; it writes the partition's marker
      // afterwards. Wait for P2's marker so that P1's is written after it.
      await waitFor("P2's abort marker", async () => (await controlRecords(broker, topic)) === 1, 10_000);
      await t1.send({ topic, messages: [{ value: 'aborted-p1-c' }] });
      await t1.abort(); // ... P1 last: the broker lists P2's before P1's
      const t3 = await p3.transaction();
      await t3.send({ topic, messages: [{ value: 'committed-1' }, { value: 'committed-2' }] });
      await t3.commit();
      await waitFor('the three transaction markers', async () => (await controlRecords(broker, topic)) === 3, 10_000);

      // The raw read_committed fetch, as the broker answers it.
      const data = await fetchFromStart(broker, topic, ISOLATION.READ_COMMITTED);
      expect(data.abortedTransactions.map((t) => t.firstOffset)).toEqual(['1', '0']); // by end, not by start

      const dataValues = (ms: RawMessage[]) => ms.filter((m) => !m.isControlRecord).map((m) => String(m.value));
      const leaked = dataValues(unpatchedFilter(data.messages, data.abortedTransactions)).filter((v) =>
        v.startsWith('aborted'),
      );
      expect(leaked.length).toBeGreaterThan(0); // the bug, reproduced on the broker's own answer
      expect(dataValues(createBatch(topic, '0', data).messages)).toEqual(['committed-1', 'committed-2']);

      // The same fetch decoded by ours (the patch's decodeResponse): kafkajs's result field for field.
      const oursPartition = await fetchFromStart(broker, topic, ISOLATION.READ_COMMITTED, decodeFetchResponse);
      const { safeIntegerOffsets, ...oursData } = oursPartition as FetchPartitionData & { safeIntegerOffsets?: boolean };
      expect(safeIntegerOffsets).toBe(true);
      // Ours' records are FetchedRecords (key, value and offset read from the response when asked):
      // as plain records (toJSON: kafkajs's fields in its order), kafkajs's.
      expect(oursData.messages.every((m) => m instanceof FetchedRecord)).toBe(true);
      expect({ ...oursData, messages: oursData.messages.map((m) => (m as FetchedRecord).toJSON()) }).toStrictEqual(data);
      expect(dataValues(createBatch(topic, '0', oursPartition).messages)).toEqual(['committed-1', 'committed-2']);

      // Our group-less reader and a kafkajs group consumer (both on the patched filter).
      const read: string[] = [];
      await reader.read({
        topic,
        partition: 0,
        fromOffset: '0',
        stallTimeoutMs: 20_000,
        onRecords: (rs) => {
          for (const r of rs) read.push(String(r.value));
        },
      });
      expect(read).toEqual(['committed-1', 'committed-2']);

      const consumed: string[] = [];
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ message }) => {
          consumed.push(String(message.value));
        },
      });
      const consumedOurs: string[] = [];
      await flowLike.connect();
      await flowLike.subscribe({ topic, fromBeginning: true });
      await flowLike.run({
        autoCommit: false,
        eachMessage: async ({ message }) => {
          consumedOurs.push(String(message.value));
        },
      });
      await waitFor('the group consumers to read both committed records', () => consumed.length >= 2 && consumedOurs.length >= 2);
      await sleep(500); // anything leaking would arrive with them
      expect(consumed).toEqual(['committed-1', 'committed-2']);
      expect(consumedOurs).toEqual(['committed-1', 'committed-2']);
      expect(ourDecodes).toBeGreaterThan(0);
    } finally {
      await closeAll(
        () => consumer.disconnect(),
        () => flowLike.disconnect(),
        () => reader.close(),
        () => cluster.disconnect(),
        () => p1.disconnect(),
        () => p2.disconnect(),
        () => p3.disconnect(),
      );
    }
  });

  it('the partition reader reads exactly the committed records up to the bound, waiting out open transactions', async () => {
    const producer = transactional(kafka.client, unique('w'));
    const reader = new PartitionReader(kafka.client);
    try {
      await producer.connect();
      const send = async (values: string[], outcome: 'commit' | 'abort') => {
        const t = await producer.transaction();
        await t.send({ topic, messages: values.map((value) => ({ key: value, value })) });
        await (outcome === 'commit' ? t.commit() : t.abort());
      };
      await send(['c0', 'c1', 'c2'], 'commit');
      await send(['a0', 'a1'], 'abort');
      await send(['c3'], 'commit');

      // An open transaction at the start of the read: the bound (log end, read_uncommitted)
      // includes it, so the read waits until it ends.
      const open = await producer.transaction();
      await open.send({ topic, messages: [{ key: 'o0', value: 'o0' }] });
      const bound = await reader.logEndOffset(topic, 0);
      expect(Number(await reader.lastStableOffset(topic, 0))).toBeLessThan(Number(bound));

      const read: string[] = [];
      const reading = reader.read({
        topic,
        partition: 0,
        fromOffset: '0',
        toOffset: bound,
        stallTimeoutMs: 20_000,
        onRecords: (rs) => {
          for (const r of rs) read.push(String(r.value));
        },
      });
      await sleep(700);
      expect(read).toEqual(['c0', 'c1', 'c2', 'c3']); // stopped at the last stable offset
      await open.commit();
      // Written after the bound was captured: not part of this read.
      await send(['late'], 'commit');
      const result = await reading;
      expect(read).toEqual(['c0', 'c1', 'c2', 'c3', 'o0']);
      expect(result).toMatchObject({ bound, records: 5 });

      // Bound = log end after a commit marker: no record carries it, the read still ends.
      const all: string[] = [];
      const whole = await reader.read({
        topic,
        partition: 0,
        fromOffset: '2',
        stallTimeoutMs: 20_000,
        onRecords: (rs) => {
          for (const r of rs) all.push(String(r.value));
        },
      });
      expect(all).toEqual(['c2', 'c3', 'o0', 'late']);
      expect(Number(whole.bound)).toBeGreaterThan(Number(bound));
    } finally {
      await closeAll(
        () => reader.close(),
        () => producer.disconnect(),
      );
    }
  });

  it('the partition reader fails with PartitionReadStalledError when an open transaction outlives its deadline', async () => {
    const producer = transactional(kafka.client, unique('w'));
    const reader = new PartitionReader(kafka.client);
    try {
      await producer.connect();
      const open = await producer.transaction();
      await open.send({ topic, messages: [{ value: 'open' }] });
      const started = Date.now();
      const read = reader.read({ topic, partition: 0, fromOffset: '0', stallTimeoutMs: 1000, onRecords: () => {} });
      await expect(read).rejects.toBeInstanceOf(PartitionReadStalledError);
      await expect(read).rejects.toMatchObject({ code: 'READ_STALLED', topic, partition: 0, position: '0' });
      expect(Date.now() - started).toBeLessThan(10_000);
      await open.abort();
    } finally {
      await closeAll(
        () => reader.close(),
        () => producer.disconnect(),
      );
    }
  });

  it('reads committed offsets with require_stable: waits out a pending transactional commit', async () => {
    const groupId = unique('group');
    await fillInput(kafka.client, topic, [0], 20);
    const producer = transactional(kafka.client, unique('w'));
    const offsets = new CommittedOffsets(kafka.client);
    const kafkaAdmin = kafka.client.kafka.admin();
    try {
      await producer.connect();
      await kafkaAdmin.connect();
      const first = await producer.transaction();
      await first.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset: '5' }] }] });
      await first.commit();
      expect((await offsets.fetch(groupId, topic, [0])).get(0)).toBe('5');

      const pending = await producer.transaction();
      await pending.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset: '15' }] }] });

      // Without require_stable the coordinator answers the old offset: the hazard.
      const [unstable] = await kafkaAdmin.fetchOffsets({ groupId, topics: [topic] });
      expect(unstable?.partitions[0]?.offset).toBe('5');

      // With it: UNSTABLE_OFFSET_COMMIT until the transaction ends, then the new offset.
      await expect(offsets.fetch(groupId, topic, [0], { deadlineMs: 300 })).rejects.toMatchObject({
        type: 'UNSTABLE_OFFSET_COMMIT',
      });
      let unstableAnswers = 0;
      const waiting = offsets.fetch(groupId, topic, [0], { deadlineMs: 20_000, onUnstable: () => unstableAnswers++ });
      await sleep(500);
      await pending.commit();
      expect((await waiting).get(0)).toBe('15');
      expect(unstableAnswers).toBeGreaterThan(0);
    } finally {
      await closeAll(
        () => offsets.close(),
        () => kafkaAdmin.disconnect(),
        () => producer.disconnect(),
      );
    }
  });
});
