/**
 * `inspect` of a Cassandra flow on the real Cassandra and Kafka: the keys each partition of the
 * input topic persisted, with their states and offsets; and a flow whose input topic is missing
 * is an error naming the topic, never an empty answer that reads as a flow without state.
 */
import { defineFlow } from '../../../define-flow';
import { CassandraBackend } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { inspectFlow } from '../../../workers/cli/inspect';
import { cassandraScope, kafkaScope, unique } from '../../support/servers';

const cassandra = cassandraScope('kft_inspect');
const kafka = kafkaScope('inspect');

const flowOn = (topic: string) =>
  defineFlow<number, number>({
    name: unique('inspect'),
    groupId: 'inspect-group',
    topics: [topic],
    fold: (state, record) => (state ?? 0) + record.value,
    persistence: { backend: 'cassandra', keyspace: cassandra.keyspace },
  });

async function inspected(definition: ReturnType<typeof flowOn>) {
  const out: Array<{ partition: number; key: string; offset: string; state: unknown }> = [];
  for await (const k of inspectFlow(definition as never)) out.push({ partition: k.partition, key: k.key, offset: k.offset, state: k.state });
  return out.sort((a, b) => a.partition - b.partition || a.key.localeCompare(b.key));
}

test("lists every partition's persisted keys with their states and offsets", async () => {
  const topic = await kafka.topic('inspect-input', 2);
  const definition = flowOn(topic);
  const backend = await CassandraBackend.forFlow<number, number>(definition as never);
  cassandra.defer(() => backend.close());
  const committer = new InMemoryOffsetCommitter();
  const p0 = await backend.forPartition({ topic, partition: 0, generation: 1, committer });
  const p1 = await backend.forPartition({ topic, partition: 1, generation: 1, committer });
  await p0.write({ writes: [{ key: 'a', snapshot: { state: 3, offset: 4 }, addKey: true }], commitOffset: 5 });
  await p1.write({ writes: [{ key: 'b', snapshot: { state: 7, offset: 9 }, addKey: true }], commitOffset: 10 });

  expect(await inspected(definition)).toEqual([
    { partition: 0, key: 'a', offset: '4', state: 3 },
    { partition: 1, key: 'b', offset: '9', state: 7 },
  ]);
});

test('a flow whose input topic does not exist is an error naming the topic, not an empty answer', async () => {
  const missing = kafka.topicName('inspect-missing');
  await expect(inspected(flowOn(missing))).rejects.toThrow(`input topic "${missing}" of flow`);
});
