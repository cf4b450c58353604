// Issue 15 on the real broker: records a fold emits are produced in the snapshot transaction, so a
// read_committed consumer of the output topic sees each exactly once — through a real stale owner
// (frozen inside eachBatch past its rebalance timeout, then woken: its flush with pending outputs
// is fenced), through an owner that goes away with outputs folded but not persisted (the next one
// re-emits them once), and through replays of records a snapshot already covers (skipped, never
// re-emitted).
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import type { Fold } from '../../../flow/fold';
import { KafkaAdmin } from '../../../kafka/admin';
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { PartitionReader, type ReadRecord } from '../../../kafka/partition-reader';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { closeAll, testClient, unique, waitFor } from '../kafka/support';
import { type Events, Owner, produce } from './harness';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `e${from + i}`);

describe('exactly-once outputs on the real broker (issue 15)', () => {
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
  const emitting: Fold<Events, string> = (state, record, ctx) => {
    if (record.key === 'k') ctx.emit({ topic: output, key: record.key, value: record.value });
    return { events: [...(state?.events ?? []), record.value] };
  };

  function owner(name: string, flushOnRevoke: boolean): Owner {
    const o = new Owner({
      client,
      name,
      groupId,
      input,
      flushOnRevoke,
      fold: emitting,
      outputs: { topics: new Set([output]), encoder: { encode: (v) => Buffer.from(String(v)) } },
      backend: { flowName: 'f', snapshotTopic, transactionalIdPrefix: prefix, transactional: true, recoveryStallTimeoutMs: 20_000, outputTopics: [output] },
    });
    owners.push(o);
    return o;
  }

  async function readOutputs(): Promise<ReadRecord[]> {
    const reader = new PartitionReader(client);
    const got: ReadRecord[] = [];
    try {
      await reader.read({ topic: output, partition: 0, fromOffset: '0', stallTimeoutMs: 10_000, onRecords: (rs) => void got.push(...rs) });
    } finally {
      await reader.close();
    }
    return got;
  }

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
});
