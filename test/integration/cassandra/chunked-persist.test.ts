// Persists of several Cassandra batches (maxWritesPerBatch below the keys a persist writes), on the
// real Cassandra and the real broker (the input offsets are the group's, committed by the member
// as a worker's are): what each write carries is decided when the persist is planned, not when
// its batch is sent — a key deleted meanwhile is not written as an undefined state, a key revived
// meanwhile does not get a delete marker at its revival's offset. After A's persist, B recovers
// and replays from the committed offset; every key must be what a plain fold of the input gives.
import { ConsumerOffsetCommitter } from '../../../persistence/cassandra/consumer-offset-committer';
import { chunkedPersistSuite, type Count } from '../kafka-persistence/chunked-persist-story';
import { cassandraScope } from '../../support/servers';
import { startBackend } from './support';

const { keyspace } = cassandraScope('kft_chunks');

describe('multi-batch persists on the real Cassandra', () => {
  chunkedPersistSuite('cassandra-chunks', (env, maxWritesPerBatch) => async () => {
    const backend = await startBackend<Count, string>(keyspace, { groupId: env.groupId, maxWritesPerBatch });
    env.kafka.defer(() => backend.close());
    const committer = new ConsumerOffsetCommitter({ consumer: env.member.consumer, membership: env.member.membership });
    return backend.forPartition({ topic: env.input, partition: 0, generation: env.member.membership.current()!.generationId, committer });
  });
});
