// The group-less readers a recovery uses — the snapshot partition reader and the committed-offset
// read — on a connection that stops answering (half-open after a network fault, or its stream out of
// step: kafkajs logs "Response without match"), on the real broker. kafkajs keeps a connection whose
// request timed out, so every later request on it timed out too: in the chaos run of seed 29101 a
// worker cut off from the broker for 4 s had its 12 partitions `recovering` for the rest of the run,
// each retry of their recovery failing with KafkaJSRequestTimeoutError after 30 s. After a timeout the
// readers open new connections, and the next request is answered.
import net from 'node:net';
import type { ISocketFactory } from 'kafkajs';
import { KAFKA_API, type TcpProxy } from '../../../chaos/tcp-proxy';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { PartitionReader } from '../../../kafka/partition-reader';
import { kafkaScope, unique } from '../../support/servers';

/** The readers' request timeout here (30 s in a worker): what a request on the dead connection waits. */
const REQUEST_TIMEOUT_MS = 5_000;

/**
 * `client` for the group-less readers, every connection of theirs to `proxy` whatever broker address
 * the metadata names (the broker advertises its own).
 */
function throughProxy(client: KafkaClient, proxy: TcpProxy): KafkaClient {
  const socketFactory: ISocketFactory = ({ onConnect }) => net.connect({ host: '127.0.0.1', port: proxy.port }, onConnect);
  const connection = { ...client.connection, socketFactory, requestTimeout: REQUEST_TIMEOUT_MS } as KafkaClient['connection'];
  return { ...client, brokers: [`127.0.0.1:${proxy.port}`], connection };
}


describe('a reader connection that stops answering, on the real broker', () => {
  const kafka = kafkaScope('reader-timeout');

  test('the snapshot partition reader: the request on it times out, the next one goes on a new connection and is answered', async () => {
    const topic = await kafka.topic('snapshots', 1);
    const producer = kafka.client.kafka.producer();
    await producer.connect();
    await producer.send({ topic, messages: [{ key: 'a', value: '1' }, { key: 'b', value: '2' }, { key: 'a', value: '3' }] });
    await producer.disconnect();
    const proxy = await kafka.proxy();
    const reader = new PartitionReader(throughProxy(kafka.client, proxy));
    kafka.defer(() => reader.close());
    expect(await reader.logEndOffset(topic, 0)).toBe('3');

    // The next ListOffsets reaches the broker, and from then on nothing comes back on its connection.
    const stalled = proxy.arm({ apiKey: KAFKA_API.LIST_OFFSETS, action: 'stall' });
    await expect(reader.logEndOffset(topic, 0)).rejects.toMatchObject({ name: 'KafkaJSRequestTimeoutError' });
    expect((await stalled).action).toBe('stall');

    const started = Date.now();
    expect(await reader.logEndOffset(topic, 0)).toBe('3');
    const keys: string[] = [];
    await reader.read({ topic, partition: 0, fromOffset: '0', onRecords: (records) => void keys.push(...records.map((r) => r.key!.toString())) });
    expect(keys).toEqual(['a', 'b', 'a']);
    // Answered at once, not after another request timeout on the dead connection.
    expect(Date.now() - started).toBeLessThan(REQUEST_TIMEOUT_MS);
  }, 90_000);

  test('the committed-offset read: the same', async () => {
    const topic = await kafka.topic('input', 1);
    const groupId = unique('group');
    const admin = kafka.client.kafka.admin();
    await admin.connect();
    await admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '0' }] });
    await admin.disconnect();
    const proxy = await kafka.proxy();
    const offsets = new CommittedOffsets(throughProxy(kafka.client, proxy));
    kafka.defer(() => offsets.close());
    expect((await offsets.fetch(groupId, topic, [0])).get(0)).toBe('0');

    const stalled = proxy.arm({ apiKey: KAFKA_API.OFFSET_FETCH, action: 'stall' });
    await expect(offsets.fetch(groupId, topic, [0])).rejects.toMatchObject({ name: 'KafkaJSRequestTimeoutError' });
    expect((await stalled).action).toBe('stall');

    const started = Date.now();
    expect((await offsets.fetch(groupId, topic, [0])).get(0)).toBe('0');
    expect(Date.now() - started).toBeLessThan(REQUEST_TIMEOUT_MS);
  }, 90_000);
});
