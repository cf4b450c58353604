// Persists of several transactions on the real broker (maxWritesPerTransaction below the keys a
// persist writes): what each write carries is decided when the persist is planned, not when its
// transaction is sent, and a key purged without a marker is purged only in a transaction whose
// offset commit passes its deletion. After A's persist, B recovers and replays from the committed
// offset; every key must be what a plain fold of the whole input gives.
import { KafkaAdmin } from '../../../kafka/admin';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { closeAll, fillInput, type RunningMember, startMember, testClient, unique } from '../kafka/support';
import { chunkedPersistTests, type Count, type StoryPorts } from './chunked-persist-story';

describe('multi-transaction persists on the real broker', () => {
  let client: KafkaClient;
  let admin: KafkaAdmin;
  let offsets: CommittedOffsets;
  let input: string;
  let groupId: string;
  let member: RunningMember;
  const topics: string[] = [];
  const backends: KafkaSnapshotBackend<Count, string>[] = [];

  beforeEach(async () => {
    client = await testClient('chunked-persist');
    admin = new KafkaAdmin(client);
    offsets = new CommittedOffsets(client);
    input = unique('input');
    groupId = unique('group');
    topics.push(input);
    await admin.ensureTopics([{ topic: input, partitions: 1 }]);
    await fillInput(client, input, [0], 20);
    member = await startMember(client, { groupId }, input);
    await member.membership.waitForJoin(30_000);
  });

  afterEach(async () => {
    await closeAll(
      ...backends.splice(0).map((b) => () => b.close()),
      () => member.consumer.disconnect(),
      () => offsets.close(),
      () => admin.deleteTopics(topics.splice(0)),
      () => admin.close(),
    );
  });

  function ports(maxWritesPerTransaction: number): StoryPorts {
    const snapshotTopic = unique('snapshots');
    topics.push(snapshotTopic);
    const transactionalIdPrefix = unique('app');
    return {
      persistence: async () => {
        const backend = new KafkaSnapshotBackend<Count, string>({
          client,
          flowName: 'chunks',
          groupId,
          inputTopic: input,
          snapshotTopic,
          transactionalIdPrefix,
          transactional: true,
          maxWritesPerTransaction,
        });
        backends.push(backend);
        return backend.forPartition({ topic: input, partition: 0, generation: () => member.membership.current() });
      },
      committed: async () => Number((await offsets.fetch(groupId, input, [0])).get(0) ?? 0),
    };
  }

  chunkedPersistTests(() => input, ports);
});
