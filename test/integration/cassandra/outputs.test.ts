// Issue 15 with Cassandra persistence, on the real Cassandra and the real broker: the records a fold
// emits are produced (acks=all, no transaction) before the LWT-fenced snapshot writes and the
// consumer's offset commit, so each lands at least once — through a real stale owner (frozen
// inside eachBatch past its rebalance timeout, then woken: its flush on revoke produces its
// outputs again before its snapshot write is refused, which stops its partition), an owner that goes away with outputs
// folded but not persisted (the next one emits them), and replays of records a snapshot covers
// (skipped). Deduplicated by the kafka-flow-source header, the outputs are exactly the expected set.
import { SnapshotWriteConflictError } from '../../../core/fence-errors';
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { PlainWriter } from '../../../kafka/plain-writer';
import { OutputProducer, OutputTopics } from '../../../persistence/kafka/dead-letter';
import { cassandraScope, kafkaScope, unique } from '../../support/servers';
import { type Events, type Owner, readCommitted } from '../kafka-persistence/harness';
import { emittingOwner, expectOutputsAtLeastOnce, staleAndLostOwners } from '../kafka-persistence/outputs-story';
import { startBackend } from './support';

const { keyspace } = cassandraScope('kft_outputs');

describe('outputs with Cassandra persistence (issue 15): at least once, exact after deduplication', () => {
  const kafka = kafkaScope('cassandra-outputs');
  let writer: PlainWriter;
  let input: string;
  let output: string;
  let groupId: string;

  beforeEach(async () => {
    writer = new PlainWriter({ client: kafka.client });
    kafka.defer(() => writer.close());
    input = await kafka.topic('input', 1);
    output = kafka.topicName('alerts');
    groupId = unique('group');
  });

  /**
   * An owner persisting to Cassandra as a worker does (persistence/backends.ts): its own backend (a
   * second session, as another process would have), snapshot writes fenced by LWT on the consumer
   * generation, outputs produced by a plain producer before them. Key `k` emits one output per
   * record; key `quiet` emits nothing and holds the committed offset back.
   */
  async function owner(name: string, flushOnRevoke: boolean): Promise<Owner> {
    const backend = await startBackend<Events, string>(keyspace, { groupId });
    kafka.defer(() => backend.close());
    const outputs = new OutputTopics(kafka.admin);
    const o = emittingOwner({ client: kafka.client, groupId, input, output }, name, flushOnRevoke, {
      persistence: async ({ generation, committer }) => {
        await outputs.ensure(output, 1);
        return backend.forPartition({ topic: input, partition: 0, generation: generation.generationId, committer, outputs: new OutputProducer(outputs, writer) });
      },
    });
    kafka.defer(() => o.stop());
    return o;
  }

  it('a stale owner, a lost owner and replays: every output at least once, each source once after deduplication', async () => {
    // A wakes up: its flush on revoke produces its outputs of e4..e6 (a second time: nothing can
    // take back what was produced) and then its snapshot write is refused by the LWT fence (B
    // wrote k under a newer generation). The refused write is a fence (a revoke flush reports it
    // instead of throwing): nothing committed, and A's partition stops with what it held — k's
    // outputs of e4..e6 included.
    const { a, c } = await staleAndLostOwners({
      client: kafka.client,
      input,
      owner,
      recovered: async () => expect((await kafka.admin.describeTopic(output))?.partitions).toBe(1),
      staleFlushed: async (a) => {
        expect(a.revokes[0]!.result).toMatchObject({ failed: 1, fenced: true, committed: undefined });
        expect(a.flow!.failed).toBeInstanceOf(SnapshotWriteConflictError);
      },
    });
    // Leaving the group ran A's revoke point once more: the stopped partition flushed nothing, so
    // A produced e4..e6's outputs once (before its refused write), not at every later flush.
    expect(a.revokes.slice(1).every((r) => r.result === undefined && r.error === undefined)).toBe(true);
    const staleFlushes = 1;

    // C recovered k @7 (B's; A's was refused) from the committed offset 0: e1..e7 skipped, e8
    // folded and emitted once.
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 1, committed: 9 });

    const got = await readCommitted(kafka.client, output);
    expect(got.every((r) => r.headers[OUTPUT_SOURCE_HEADER] !== undefined)).toBe(true);
    // At least once, and how: e4..e6 from B and from A's stale flush, the rest once.
    expectOutputsAtLeastOnce(got, input, (n) => ([4, 5, 6].includes(n) ? 1 + staleFlushes : 1));
  });
});
