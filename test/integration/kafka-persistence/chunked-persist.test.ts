// Persists of several transactions on the real broker (maxWritesPerTransaction below the keys a
// persist writes): what each write carries is decided when the persist is planned, not when its
// transaction is sent, and a key purged without a marker is purged only in a transaction whose
// offset commit passes its deletion. After A's persist, B recovers and replays from the committed
// offset; every key must be what a plain fold of the whole input gives.
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { unique } from '../../support/servers';
import { chunkedPersistSuite, type Count } from './chunked-persist-story';

describe('multi-transaction persists on the real broker', () => {
  chunkedPersistSuite('chunked-persist', (env, maxWritesPerTransaction) => {
    const snapshotTopic = env.kafka.topicName('snapshots');
    const transactionalIdPrefix = unique('app');
    return async () => {
      const backend = new KafkaSnapshotBackend<Count, string>({
        client: env.client,
        flowName: 'chunks',
        groupId: env.groupId,
        inputTopic: env.input,
        snapshotTopic,
        transactionalIdPrefix,
        transactional: true,
        maxWritesPerTransaction,
      });
      env.kafka.defer(() => backend.close());
      return backend.forPartition({ topic: env.input, partition: 0, generation: () => env.member.membership.current() });
    };
  });
});
