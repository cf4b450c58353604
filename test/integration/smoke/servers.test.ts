import { Client as CassandraClient, types } from 'cassandra-driver';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { logLevel } from 'kafkajs';
import { newKafka } from '../../../kafka/client';
import { cassandraContactPoints, kafkaBrokers, temporalAddress, temporalNamespace, unique } from '../../support/servers';

// Proof that each server is real: the behaviour checked here is what a fake would not have.

describe('Kafka', () => {
  const kafka = newKafka({ clientId: 'smoke', brokers: kafkaBrokers, logLevel: logLevel.ERROR });

  test('a transaction with sendOffsets commits a record and a group offset together', async () => {
    const topic = unique('smoke-txn');
    const groupId = unique('smoke-group');
    const admin = kafka.admin();
    const producer = kafka.producer({ transactionalId: unique('smoke-tx'), idempotent: true, maxInFlightRequests: 1 });
    const consumer = kafka.consumer({ groupId: unique('smoke-reader'), readUncommitted: false });
    try {
      await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
      await producer.connect();

      const aborted = await producer.transaction();
      await aborted.send({ topic, messages: [{ key: 'k', value: 'aborted' }] });
      await aborted.abort();

      const txn = await producer.transaction();
      await txn.send({ topic, messages: [{ key: 'k', value: 'committed' }] });
      await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset: '42' }] }] });
      await txn.commit();

      const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
      expect(offsets[0]?.partitions[0]?.offset).toBe('42');

      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const seen: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no committed record read within 30 s')), 30_000);
        void consumer.run({
          eachMessage: async ({ message }) => {
            seen.push(String(message.value));
            clearTimeout(timer);
            resolve();
          },
        });
      });
      expect(seen).toEqual(['committed']); // read_committed: the aborted record is not delivered
    } finally {
      await consumer.disconnect().catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
    }
  });
});

describe('Temporal', () => {
  test('a workflow runs an activity on a real worker and completes', async () => {
    const taskQueue = unique('smoke');
    const nativeConnection = await NativeConnection.connect({ address: temporalAddress });
    const connection = await Connection.connect({ address: temporalAddress });
    try {
      const worker = await Worker.create({
        connection: nativeConnection,
        namespace: temporalNamespace,
        taskQueue,
        workflowsPath: require.resolve('./workflows'),
        activities: { shout: async (s: string) => s.toUpperCase() },
      });
      const client = new Client({ connection, namespace: temporalNamespace });
      const result = await worker.runUntil(
        client.workflow.execute('smokeWorkflow', { taskQueue, workflowId: unique('smoke-wf'), args: ['temporal'] }),
      );
      expect(result).toBe('hello, TEMPORAL');
    } finally {
      await connection.close();
      await nativeConnection.close();
    }
  });
});

describe('Cassandra', () => {
  test('a lightweight transaction applies once and refuses a stale condition', async () => {
    const keyspace = unique('smoke').replace(/-/g, '_');
    const client = new CassandraClient({ contactPoints: cassandraContactPoints, localDataCenter: 'datacenter1' });
    try {
      await client.connect();
      await client.execute(
        `CREATE KEYSPACE ${keyspace} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
      );
      await client.execute(`CREATE TABLE ${keyspace}.snapshots (key text PRIMARY KEY, offset bigint, value text)`);
      const opts = { prepare: true, serialConsistency: types.consistencies.serial };
      const insert = `INSERT INTO ${keyspace}.snapshots (key, offset, value) VALUES (?, ?, ?) IF NOT EXISTS`;
      const first = await client.execute(insert, ['k', 10, 'v10'], opts);
      expect(first.wasApplied()).toBe(true);
      const again = await client.execute(insert, ['k', 11, 'v11'], opts);
      expect(again.wasApplied()).toBe(false);

      const update = `UPDATE ${keyspace}.snapshots SET offset = ?, value = ? WHERE key = ? IF offset < ?`;
      const newer = await client.execute(update, [20, 'v20', 'k', 20], opts);
      expect(newer.wasApplied()).toBe(true);
      const stale = await client.execute(update, [15, 'v15', 'k', 15], opts);
      expect(stale.wasApplied()).toBe(false);
      expect(stale.first().get('offset').toString()).toBe('20'); // the refusal reports what is stored

      const row = (await client.execute(`SELECT value FROM ${keyspace}.snapshots WHERE key = 'k'`)).first();
      expect(row.get('value')).toBe('v20');
    } finally {
      await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`).catch(() => undefined);
      await client.shutdown();
    }
  });
});
