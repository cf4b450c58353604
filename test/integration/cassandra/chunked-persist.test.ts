// Persists of several Cassandra batches (maxWritesPerBatch below the keys a persist writes), on the
// real Cassandra and the real broker (the input offsets are the group's, committed by the member
// as a worker's are): what each write carries is decided when the persist is planned, not when
// its batch is sent — a key deleted meanwhile is not written as an undefined state, a key revived
// meanwhile does not get a delete marker at its revival's offset. After A's persist, B recovers
// and replays from the committed offset; every key must be what a plain fold of the input gives.
import { KafkaAdmin } from '../../../kafka/admin';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import type { CassandraBackend } from '../../../persistence/cassandra';
import { ConsumerOffsetCommitter } from '../../../persistence/cassandra/consumer-offset-committer';
import { closeAll as closeKafka, fillInput, type RunningMember, startMember, testClient, unique } from '../kafka/support';
import { chunkedPersistTests, type Count, type StoryPorts } from '../kafka-persistence/chunked-persist-story';
import { closeAll, dropKeyspace, keyspaceName, startBackend } from './support';

const keyspace = keyspaceName('kft_chunks');

describe('multi-batch persists on the real Cassandra', () => {
  let client: KafkaClient;
  let admin: KafkaAdmin;
  let offsets: CommittedOffsets;
  let input: string;
  let groupId: string;
  let member: RunningMember;
  const backends: CassandraBackend<Count, string>[] = [];

  beforeEach(async () => {
    client = await testClient('cassandra-chunks');
    admin = new KafkaAdmin(client);
    offsets = new CommittedOffsets(client);
    input = unique('input');
    groupId = unique('group');
    await admin.ensureTopics([{ topic: input, partitions: 1 }]);
    await fillInput(client, input, [0], 20);
    member = await startMember(client, { groupId }, input);
    await member.membership.waitForJoin(30_000);
  });

  afterEach(async () => {
    await closeKafka(
      ...backends.splice(0).map((b) => () => b.close()),
      () => member.consumer.disconnect(),
      () => offsets.close(),
      () => admin.deleteTopics([input]),
      () => admin.close(),
    );
  });

  afterAll(async () => {
    await closeAll(() => dropKeyspace(keyspace));
  });

  function ports(maxWritesPerBatch: number): StoryPorts {
    return {
      persistence: async () => {
        const backend = await startBackend<Count, string>(keyspace, { groupId, maxWritesPerBatch });
        backends.push(backend);
        const committer = new ConsumerOffsetCommitter({ consumer: member.consumer, membership: member.membership });
        return backend.forPartition({ topic: input, partition: 0, generation: member.membership.current()!.generationId, committer });
      },
      committed: async () => Number((await offsets.fetch(groupId, input, [0])).get(0) ?? 0),
    };
  }

  chunkedPersistTests(() => input, ports);
});
