// Issue 15 with Cassandra persistence, on the real Cassandra and the real broker: the records a fold
// emits are produced (acks=all, no transaction) before the LWT-fenced snapshot writes and the
// consumer's offset commit, so each lands at least once — through a real stale owner (frozen
// inside eachBatch past its rebalance timeout, then woken: its flush on revoke produces its
// outputs again before its snapshot write is refused, which stops its partition), an owner that goes away with outputs
// folded but not persisted (the next one emits them), and replays of records a snapshot covers
// (skipped). Deduplicated by the kafka-flow-source header, the outputs are exactly the expected set.
import { SnapshotWriteConflictError } from '../../../core/fence-errors';
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { KafkaAdmin } from '../../../kafka/admin';
import type { KafkaClient } from '../../../kafka/client';
import { PlainWriter } from '../../../kafka/plain-writer';
import type { CassandraBackend } from '../../../persistence/cassandra';
import { OutputProducer, OutputTopics } from '../../../persistence/kafka/dead-letter';
import { closeAll as closeKafka, testClient, unique, waitFor } from '../kafka/support';
import {
  countBySource,
  dedupeBySource,
  emittingFold,
  type Events,
  events,
  Owner,
  produce,
  readCommitted,
  textOutputs,
} from '../kafka-persistence/harness';
import { closeAll, dropKeyspace, keyspaceName, startBackend } from './support';

const keyspace = keyspaceName('kft_outputs');

describe('outputs with Cassandra persistence (issue 15): at least once, exact after deduplication', () => {
  let client: KafkaClient;
  let admin: KafkaAdmin;
  let writer: PlainWriter;
  let input: string;
  let output: string;
  let groupId: string;
  const owners: Owner[] = [];
  const backends: CassandraBackend<Events, string>[] = [];

  beforeEach(async () => {
    client = await testClient('cassandra-outputs');
    admin = new KafkaAdmin(client);
    writer = new PlainWriter({ client });
    input = unique('input');
    output = unique('alerts');
    groupId = unique('group');
    await admin.ensureTopics([{ topic: input, partitions: 1 }]);
  });

  afterEach(async () => {
    await closeKafka(
      ...owners.splice(0).map((o) => () => o.stop()),
      ...backends.splice(0).map((b) => () => b.close()),
      () => writer.close(),
      () => admin.deleteTopics([input, output]),
      () => admin.close(),
    );
  });

  afterAll(async () => {
    await closeAll(() => dropKeyspace(keyspace));
  });

  /**
   * An owner persisting to Cassandra as a worker does (workers/backends.ts): its own backend (a
   * second session, as another process would have), snapshot writes fenced by LWT on the consumer
   * generation, outputs produced by a plain producer before them. Key `k` emits one output per
   * record; key `quiet` emits nothing and holds the committed offset back.
   */
  async function owner(name: string, flushOnRevoke: boolean): Promise<Owner> {
    const backend = await startBackend<Events, string>(keyspace, { groupId });
    backends.push(backend);
    const outputs = new OutputTopics(admin);
    const o = new Owner({
      client,
      name,
      groupId,
      input,
      flushOnRevoke,
      fold: emittingFold(output),
      outputs: textOutputs(output),
      persistence: async ({ generation, committer }) => {
        await outputs.ensure(output, 1);
        return backend.forPartition({ topic: input, partition: 0, generation: generation.generationId, committer, outputs: new OutputProducer(outputs, writer) });
      },
    });
    owners.push(o);
    return o;
  }

  it('a stale owner, a lost owner and replays: every output at least once, each source once after deduplication', async () => {
    // A: `quiet` at offset 0, k's e1..e3 at 1..3, their outputs produced by an outputs persist
    // (then k's snapshot @3).
    const a = await owner('A', true);
    await a.start();
    const genA = await a.owns();
    await a.recover();
    expect((await admin.describeTopic(output))?.partitions).toBe(1);
    await produce(client, input, 'quiet', ['q1']);
    await produce(client, input, 'k', events(1, 3));
    await a.folded(4);
    expect(await a.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 3 });

    // A folds e4..e6 (outputs pending in its memory) and freezes inside eachBatch: evicted.
    await produce(client, input, 'k', events(4, 5));
    await a.folded(6);
    a.freeze();
    await produce(client, input, 'k', events(6, 6));
    await waitFor('A to freeze after folding e6', () => a.stuck);

    // B takes over from the committed offset 0: k's snapshot @3 skips e1..e3; B folds e4..e7 and
    // produces their outputs with k's snapshot @7 (its newer generation); then folds e8 and keeps
    // its output in memory.
    const b = await owner('B', false);
    await b.start();
    await b.owns(30_000, genA);
    await b.recover();
    await produce(client, input, 'k', events(7, 7));
    await b.folded(8);
    expect(await b.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 4 });
    await produce(client, input, 'k', events(8, 8));
    await b.folded(9);

    // A wakes up: its flush on revoke produces its outputs of e4..e6 (a second time: nothing can
    // take back what was produced) and then its snapshot write is refused by the LWT fence (B
    // wrote k under a newer generation).
    a.thaw();
    await waitFor("A's flush on revoke", () => a.revokes.length > 0, 30_000);
    // The refused write is a fence (a revoke flush reports it instead of throwing): nothing
    // committed, and A's partition stops with what it held — k's outputs of e4..e6 included.
    expect(a.revokes[0]!.result).toMatchObject({ failed: 1, fenced: true, committed: undefined });
    expect(a.flow!.failed).toBeInstanceOf(SnapshotWriteConflictError);
    await a.stop();
    // Leaving the group ran A's revoke point once more: the stopped partition flushed nothing, so
    // A produced e4..e6's outputs once (before its refused write), not at every later flush.
    expect(a.revokes.slice(1).every((r) => r.result === undefined && r.error === undefined)).toBe(true);
    const staleFlushes = 1;
    await b.stop(); // no flush on revoke: e8's output is lost with B's memory

    // C recovers k @7 (B's; A's was refused) from the committed offset 0: e1..e7 skipped, e8
    // folded and emitted once.
    const c = await owner('C', false);
    await c.start();
    await c.owns();
    await c.recover();
    await c.folded(9);
    expect(c.flow!.stateOf('k')).toEqual({ events: events(1, 8) });
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 1, committed: '9' });

    const got = await readCommitted(client, output);
    expect(got.every((r) => r.headers[OUTPUT_SOURCE_HEADER] !== undefined)).toBe(true);
    const expected = events(1, 8).map((value, i) => ({ source: `${input}/0/${i + 1}/0`, value }));
    expect(dedupeBySource(got)).toEqual(expected); // each copy of a source carries the same value
    // At least once, and how: e4..e6 from B and from A's stale flush, the rest once.
    expect(countBySource(got)).toEqual(Object.fromEntries(expected.map((e, i) => [e.source, [4, 5, 6].includes(i + 1) ? 1 + staleFlushes : 1])));
  });
});
