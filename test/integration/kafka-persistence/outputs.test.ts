// Issue 15 on the real broker: records a fold emits are produced in the snapshot transaction, so a
// read_committed consumer of the output topic sees each exactly once — through a real stale owner
// (frozen inside eachBatch past its rebalance timeout, then woken: its flush with pending outputs
// is fenced), through an owner that goes away with outputs folded but not persisted (the next one
// re-emits them once), and through replays of records a snapshot already covers (skipped, never
// re-emitted). In caching mode (no transactions) the same story delivers every output at least
// once: the stale owner's flush produces its outputs before its (unfenced) writes, so some land
// twice, and deduplicating by the kafka-flow-source header gives exactly the expected set.
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { kafkaScope, unique } from '../../support/servers';
import { events, type Owner, readCommitted } from './harness';
import { emittingOwner, expectOutputsAtLeastOnce, staleAndLostOwners } from './outputs-story';

describe('outputs on the real broker (issue 15)', () => {
  const kafka = kafkaScope('outputs');
  let input: string;
  let output: string;
  let snapshotTopic: string;
  let groupId: string;
  let prefix: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 1);
    output = kafka.topicName('alerts');
    snapshotTopic = kafka.topicName('snapshots');
    groupId = unique('group');
    prefix = unique('app');
  });

  /** An owner of the story (outputs-story.ts), persisting to the Kafka snapshot backend. */
  function owner(name: string, flushOnRevoke: boolean, transactional = true): Owner {
    const o = emittingOwner({ client: kafka.client, groupId, input, output }, name, flushOnRevoke, {
      backend: { flowName: 'f', snapshotTopic, transactionalIdPrefix: prefix, transactional, recoveryStallTimeoutMs: 20_000, outputTopics: [output] },
    });
    kafka.defer(() => o.stop());
    return o;
  }

  const readOutputs = () => readCommitted(kafka.client, output);
  const range = events;

  it('a read_committed consumer sees each output once: stale owner fenced, lost owner re-emitted once, replays skipped', async () => {
    // B's recovery fences A's producer, so A's flush on revoke, carrying e4..e6's outputs, is
    // fenced; so is its next outputs persist.
    const { c } = await staleAndLostOwners({
      client: kafka.client,
      input,
      owner,
      recovered: async () => expect((await kafka.admin.describeTopic(output))?.partitions).toBe(1), // created with the input's count
      staleFlushed: async (a) => {
        expect(a.revokes[0]!.result).toMatchObject({ written: 0, fenced: true });
        await expect(a.flow!.persist(Date.now(), 'outputs')).rejects.toBeInstanceOf(SnapshotWriteFencedError);
      },
    });

    // C recovered from the committed offset (still 0): e1..e7 skipped, e8 folded and emitted once.
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 1, committed: 9 });

    const got = await readOutputs();
    expect(got.map((r) => String(r.value))).toEqual(range(1, 8)); // each once, in order
    expect(got.map((r) => String(r.headers[OUTPUT_SOURCE_HEADER]))).toEqual(range(1, 8).map((_, i) => `${input}/0/${i + 1}/0`));
    const offsets = new CommittedOffsets(kafka.client);
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('9');
    } finally {
      await offsets.close();
    }
  });

  it('caching mode: every output at least once through a stale owner, a lost owner and replays; deduplicated by kafka-flow-source, exactly the expected set', async () => {
    // Nothing fences A's flush on revoke in caching mode, so its outputs of e4..e6 are produced (a
    // second time) before its stale snapshot @6 — which overwrites B's @7 (kafka-flow#732, what
    // transactional mode fences); only its offset commit is refused.
    const { c } = await staleAndLostOwners({ client: kafka.client, input, owner: (name, flushOnRevoke) => owner(name, flushOnRevoke, false), staleFlushed: async () => {} });
    // C recovered k @6 (A's stale write, a prefix of the truth) from the committed offset 0: e7 is
    // folded and emitted again, e8 for the first time.
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 2, committed: 9 });

    // At least once, and how: e4..e6 twice (A's stale flush and B), e7 twice (B, and C's replay).
    expectOutputsAtLeastOnce(await readOutputs(), input, (n) => ([4, 5, 6, 7].includes(n) ? 2 : 1));
  });
});
