// A fence storm on the real broker (the crash cascade of kafka-flow #938 is what must not happen):
// a rival initializes partition 0's transactional.id again and again; each time this process's
// partition-0 writer is fenced — typed, counted, that partition stopped — and takes the partition
// back on its "next assignment". Hundreds of fences in a row: partition 1 of the same backend
// keeps committing throughout, nothing acknowledged is lost, nothing fenced becomes visible, and
// no promise is left rejected unhandled.
import { TransactionalWriter } from '../../../kafka/transactional-writer';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { closeAll, kafkaScope, unique } from '../../support/servers';
import { snapshotsOf } from './harness';

const FENCES = 200;

describe('a fence storm on the real broker', () => {
  const kafka = kafkaScope('storm');
  let input: string;
  let snapshotTopic: string;
  let groupId: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 2);
    snapshotTopic = kafka.topicName('snapshots');
    groupId = unique('group');
  });

  it(`tolerates ${FENCES} fences in a row on one partition while the other goes on, losing nothing`, async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const prefix = unique('app');
    const backend = new KafkaSnapshotBackend<number>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic, transactionalIdPrefix: prefix, transactional: true });
    const rival = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: prefix, partition: 0, groupId });
    const reader = new KafkaSnapshotBackend<number>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic });
    try {
      const m = await kafka.member({ groupId }, input);
      await m.membership.waitForJoin(30_000);
      const assign = (partition: number) => backend.forPartition({ topic: input, partition, generation: () => m.membership.current() });
      const other = await assign(1);
      const acknowledged = new Map<string, number>();
      const acknowledgedOther = new Map<string, number>();
      let fenced = 0;
      for (let i = 1; i <= FENCES; i++) {
        const p0 = await assign(0); // the next assignment: fences the rival, recovers nothing new here
        await p0.write({ writes: [{ key: `k${i % 7}`, snapshot: { state: i, offset: i } }], commitOffset: i + 1 });
        acknowledged.set(`k${i % 7}`, i);

        await rival.init(); // the storm: partition 0's id initialized elsewhere
        const error = await p0.write({ writes: [{ key: `k${i % 7}`, snapshot: { state: -i, offset: i } }], commitOffset: i + 1 }).catch((e: unknown) => e);
        if (error instanceof SnapshotWriteFencedError && error.reason === 'producer-epoch') fenced++;
        await expect(p0.write({ writes: [], commitOffset: i + 1 })).rejects.toBe(error); // stopped until reassigned

        await other.write({ writes: [{ key: `j${i % 5}`, snapshot: { state: i, offset: i } }], commitOffset: i + 1 });
        acknowledgedOther.set(`j${i % 5}`, i);
      }
      expect(fenced).toBe(FENCES);
      expect(backend.fences).toBe(FENCES);
      expect(other.fenced).toBeUndefined();
      expect(other.stats.transactions).toBe(FENCES);

      const stored0 = await snapshotsOf(reader, 0);
      expect(new Map([...stored0].map(([k, v]) => [k, v.state]))).toEqual(acknowledged); // every acknowledged write, no fenced one
      const stored1 = await snapshotsOf(reader, 1);
      expect(new Map([...stored1].map(([k, v]) => [k, v.state]))).toEqual(acknowledgedOther);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await closeAll(() => rival.close(), () => backend.close(), () => reader.close());
    }
  });
});
