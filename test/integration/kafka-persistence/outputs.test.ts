// Issue 15 on the real broker: records a fold emits are produced in the snapshot transaction, so a
// read_committed consumer of the output topic sees each exactly once — through a real stale owner
// (frozen inside eachBatch past its rebalance timeout, then woken: its flush with pending outputs
// is fenced), through an owner that goes away with outputs folded but not persisted (the next one
// re-emits them once), and through replays of records a snapshot already covers (skipped, never
// re-emitted). In caching mode (no transactions) the same story delivers every output at least
// once: the stale owner's flush produces its outputs before its (unfenced) writes, so some land
// twice, and deduplicating by the kafka-flow-source header gives exactly the expected set.
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import { KafkaAdmin } from '../../../kafka/admin';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { closeAll, testClient, unique, waitFor } from '../kafka/support';
import { countBySource, dedupeBySource, emittingFold, events, Owner, produce, readCommitted, textOutputs } from './harness';

describe('outputs on the real broker (issue 15)', () => {
  let client: KafkaClient;
  let admin: KafkaAdmin;
  let input: string;
  let output: string;
  let snapshotTopic: string;
  let groupId: string;
  let prefix: string;
  const owners: Owner[] = [];

  beforeEach(async () => {
    client = await testClient('outputs');
    admin = new KafkaAdmin(client);
    input = unique('input');
    output = unique('alerts');
    snapshotTopic = unique('snapshots');
    groupId = unique('group');
    prefix = unique('app');
    await admin.ensureTopics([{ topic: input, partitions: 1 }]);
  });

  afterEach(async () => {
    await closeAll(...owners.splice(0).map((o) => () => o.stop()), () => admin.deleteTopics([input, output, snapshotTopic]), () => admin.close());
  });

  /** Key `k` emits one output per record (its value); key `quiet` emits nothing and holds the committed offset back. */
  function owner(name: string, flushOnRevoke: boolean, transactional = true): Owner {
    const o = new Owner({
      client,
      name,
      groupId,
      input,
      flushOnRevoke,
      fold: emittingFold(output),
      outputs: textOutputs(output),
      backend: { flowName: 'f', snapshotTopic, transactionalIdPrefix: prefix, transactional, recoveryStallTimeoutMs: 20_000, outputTopics: [output] },
    });
    owners.push(o);
    return o;
  }

  const readOutputs = () => readCommitted(client, output);
  const range = events;

  it('a read_committed consumer sees each output once: stale owner fenced, lost owner re-emitted once, replays skipped', async () => {
    // A owns the partition: `quiet` at offset 0, k's e1..e3 at 1..3. An outputs persist writes only k.
    const a = owner('A', true);
    await a.start();
    const genA = await a.owns();
    await a.recover();
    expect((await admin.describeTopic(output))?.partitions).toBe(1); // created with the input's count
    await produce(client, input, 'quiet', ['q1']);
    await produce(client, input, 'k', range(1, 3));
    await a.folded(4);
    expect(a.flow!.outputsDue(Date.now() + 1000)).toBe(true);
    expect(await a.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 3, committed: undefined });

    // A folds e4..e6 (outputs pending in memory), then freezes inside eachBatch: evicted.
    await produce(client, input, 'k', range(4, 5));
    await a.folded(6);
    a.freeze();
    await produce(client, input, 'k', range(6, 6));
    await waitFor('A to freeze after folding e6', () => a.stuck);

    // B takes over: recovery fences A's producer; it replays from the committed offset 0, skips
    // e1..e3 (k's snapshot is at 3: no re-emit), folds e4..e7 and emits them itself.
    const b = owner('B', false);
    await b.start();
    await b.owns(30_000, genA);
    await b.recover();
    await produce(client, input, 'k', range(7, 7));
    await b.folded(8);
    expect(b.flow!.stateOf('k')).toEqual({ events: range(1, 7) });
    expect(await b.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 4 });
    // B folds e8 and goes away before persisting it (its output never left).
    await produce(client, input, 'k', range(8, 8));
    await b.folded(9);

    // A wakes up: its flush on revoke, carrying e4..e6's outputs, is fenced; so is its next outputs persist.
    a.thaw();
    await waitFor("A's flush on revoke", () => a.revokes.length > 0, 30_000);
    expect(a.revokes[0]!.result).toMatchObject({ written: 0, fenced: true });
    await expect(a.flow!.persist(Date.now(), 'outputs')).rejects.toBeInstanceOf(SnapshotWriteFencedError);
    await a.stop();
    await b.stop(); // no flush on revoke: e8's output is lost with B's memory

    // C recovers from the committed offset (still 0): e1..e7 skipped, e8 folded and emitted once.
    const c = owner('C', false);
    await c.start();
    await c.owns();
    await c.recover();
    await c.folded(9);
    expect(c.flow!.stateOf('k')).toEqual({ events: range(1, 8) });
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 1, committed: '9' });

    const got = await readOutputs();
    expect(got.map((r) => String(r.value))).toEqual(range(1, 8)); // each once, in order
    expect(got.map((r) => String(r.headers[OUTPUT_SOURCE_HEADER]))).toEqual(range(1, 8).map((_, i) => `${input}/0/${i + 1}/0`));
    const offsets = new CommittedOffsets(client);
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('9');
    } finally {
      await offsets.close();
    }
  });
  it('caching mode: every output at least once through a stale owner, a lost owner and replays; deduplicated by kafka-flow-source, exactly the expected set', async () => {
    // A: `quiet` at offset 0 (holds the committed offset at 0 throughout), k's e1..e3 at 1..3,
    // emitted and produced by an outputs persist (before k's snapshot @3).
    const a = owner('A', true, false);
    await a.start();
    const genA = await a.owns();
    await a.recover();
    await produce(client, input, 'quiet', ['q1']);
    await produce(client, input, 'k', range(1, 3));
    await a.folded(4);
    expect(await a.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 3 });

    // A folds e4..e6 (outputs pending in its memory) and freezes inside eachBatch: evicted.
    await produce(client, input, 'k', range(4, 5));
    await a.folded(6);
    a.freeze();
    await produce(client, input, 'k', range(6, 6));
    await waitFor('A to freeze after folding e6', () => a.stuck);

    // B takes over from the committed offset 0: k's snapshot @3 skips e1..e3; B folds e4..e7 and
    // produces their outputs with k's snapshot @7; then folds e8 and keeps its output in memory.
    const b = owner('B', false, false);
    await b.start();
    await b.owns(30_000, genA);
    await b.recover();
    await produce(client, input, 'k', range(7, 7));
    await b.folded(8);
    expect(await b.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 4 });
    await produce(client, input, 'k', range(8, 8));
    await b.folded(9);

    // A wakes up: nothing fences its flush on revoke in caching mode, so its outputs of e4..e6 are
    // produced (a second time) before its stale snapshot @6 — which overwrites B's @7 (kafka-flow
    // #732, what transactional mode fences); only its offset commit is refused.
    a.thaw();
    await waitFor("A's flush on revoke", () => a.revokes.length > 0, 30_000);
    await a.stop();
    await b.stop(); // no flush on revoke: e8's output is lost with B's memory

    // C recovers k @6 (A's stale write, a prefix of the truth) from the committed offset 0: e7 is
    // folded and emitted again, e8 for the first time.
    const c = owner('C', false, false);
    await c.start();
    await c.owns();
    await c.recover();
    await c.folded(9);
    expect(c.flow!.stateOf('k')).toEqual({ events: range(1, 8) });
    expect(await c.persistPeriodically()).toMatchObject({ outputs: 2, committed: '9' });

    const got = await readOutputs();
    const expected = range(1, 8).map((value, i) => ({ source: `${input}/0/${i + 1}/0`, value }));
    expect(dedupeBySource(got)).toEqual(expected); // each copy of a source carries the same value
    // At least once, and how: e4..e6 twice (A's stale flush and B), e7 twice (B, and C's replay).
    expect(countBySource(got)).toEqual(Object.fromEntries(expected.map((e, i) => [e.source, [4, 5, 6, 7].includes(i + 1) ? 2 : 1])));
  });
});
