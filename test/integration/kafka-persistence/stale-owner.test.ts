// kafka-flow #732 on the real broker, with a real stale owner: a second group member takes the
// partition over while the first one is frozen inside eachBatch (it stops heartbeating and is
// evicted at its rebalance timeout), then the first one wakes up and flushes its stale state.
// (1) caching mode: the stale flush-on-revoke overwrites the new owner's snapshot (the corruption);
// (2) transactional mode: the same flush is fenced and the new owner's snapshot survives;
// (3) a stale writer's next periodic flush fails fast (generation fence alone: the new owner has
//     not initialized its producer, so no producer-epoch fence is involved).
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { closeAll, kafkaScope, unique, waitFor } from '../../support/servers';
import { type Events, Owner, produce, snapshotsOf } from './harness';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `e${from + i}`);

describe('a stale owner on the real broker (kafka-flow #732)', () => {
  const kafka = kafkaScope('stale');
  let input: string;
  let snapshotTopic: string;
  let groupId: string;
  let prefix: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 1);
    snapshotTopic = kafka.topicName('snapshots');
    groupId = unique('group');
    prefix = unique('app');
  });

  function owner(name: string, transactional: boolean): Owner {
    const o = new Owner({
      client: kafka.client,
      name,
      groupId,
      input,
      flushOnRevoke: true,
      backend: { flowName: 'f', snapshotTopic, transactionalIdPrefix: prefix, transactional, recoveryStallTimeoutMs: 20_000 },
    });
    kafka.defer(() => o.stop());
    return o;
  }

  /**
   * A owns the partition and folds e1..e6 without flushing, then freezes inside eachBatch. B joins,
   * takes over when A misses the rebalance, recovers, folds e1..e10 and persists (snapshot @9,
   * commit 10). Then A wakes up; its revoke point flushes A's stale state.
   */
  async function staleFlushOnRevoke(transactional: boolean) {
    const a = owner('A', transactional);
    await a.start();
    const genA = await a.owns();
    await a.recover();
    await produce(kafka.client, input, 'k', range(1, 5));
    await a.folded(5);
    a.freeze();
    await produce(kafka.client, input, 'k', range(6, 6));
    await waitFor('A to freeze inside eachBatch after folding e6', () => a.stuck);
    expect(a.flow!.stateOf('k')).toEqual({ events: range(1, 6) });

    const b = owner('B', transactional);
    await b.start();
    await b.owns(30_000, genA); // A misses the rebalance: evicted, B owns the partition
    await b.recover();
    await b.folded(6);
    await produce(kafka.client, input, 'k', range(7, 10));
    await b.folded(10);
    const persisted = await b.persistPeriodically();
    expect(persisted).toMatchObject({ committed: 10, written: 1, fenced: false });

    a.thaw(); // A wakes up: its batch ends, kafkajs finds it was evicted, the revoke point flushes
    await waitFor('A\'s flush on revoke', () => a.revokes.length > 0, 30_000);
    const offsets = new CommittedOffsets(kafka.client);
    try {
      const committed = (await offsets.fetch(groupId, input, [0])).get(0);
      const reader = new KafkaSnapshotBackend<Events>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic });
      try {
        return { a, b, revoke: a.revokes[0]!, committed, stored: (await snapshotsOf(reader)).get('k') };
      } finally {
        await reader.close();
      }
    } finally {
      await offsets.close();
    }
  }

  it('(1) caching mode: a stale flush-on-revoke overwrites the new owner\'s snapshot — the corruption', async () => {
    const { revoke, committed, stored } = await staleFlushOnRevoke(false);
    // A's write landed (a plain producer is not fenced); only its offset commit was refused.
    expect(revoke.result).toMatchObject({ written: 1, fenced: true });
    expect(committed).toBe('10'); // B's commit stands...
    // ...but the snapshot is A's: recovery would resume at offset 10 on state missing e7..e10.
    expect(stored).toEqual({ offset: '5', state: { events: range(1, 6) } });
  });

  it('(2) transactional mode: the same stale flush is fenced and the new owner\'s snapshot survives', async () => {
    const { a, revoke, committed, stored } = await staleFlushOnRevoke(true);
    expect(revoke.result).toMatchObject({ written: 0, fenced: true });
    expect(a.persistence!.fenced).toBeInstanceOf(SnapshotWriteFencedError);
    // B's takeover initialized the partition's transactional.id first, so A meets the epoch fence.
    expect(a.persistence!.fenced).toMatchObject({ code: 'FENCED', reason: 'producer-epoch', transactionalId: `${prefix}-snapshot-0` });
    expect(a.backend.fences).toBe(1);
    expect(committed).toBe('10');
    expect(stored).toEqual({ offset: '9', state: { events: range(1, 10) } });
  });

  it('(3) transactional mode: a stale writer\'s next periodic flush fails fast on the generation fence', async () => {
    const a = owner('A', true);
    await a.start();
    const genA = await a.owns();
    await a.recover();
    await produce(kafka.client, input, 'k', range(1, 3));
    await a.folded(3);
    expect(await a.persistPeriodically()).toMatchObject({ committed: 3, written: 1 });

    a.freeze();
    await produce(kafka.client, input, 'k', range(4, 4));
    await waitFor('A to freeze after folding e4', () => a.stuck);
    // B takes the partition over but does not recover it yet: its producer has not fenced A's.
    const b = owner('B', true);
    await b.start();
    await b.owns(30_000, genA);

    // A (still frozen, evicted) runs its next periodic flush, as the workflow's timer would.
    const started = performance.now();
    const error = await a.persistPeriodically().then(
      () => undefined,
      (e: unknown) => e,
    );
    const ms = performance.now() - started;
    expect(error).toBeInstanceOf(SnapshotWriteFencedError);
    // The group fence of KIP-447, not the producer epoch: A was evicted, so the coordinator knows
    // neither its generation nor its member id (UNKNOWN_MEMBER_ID; test (4) shows ILLEGAL_GENERATION).
    expect(error).toMatchObject({ code: 'FENCED', reason: 'member', transactionalId: `${prefix}-snapshot-0` });
    expect(ms).toBeLessThan(2_000);
    expect(a.flow!.failed).toBe(error); // the partition stopped here
    expect(() => a.flow!.handleBatch([])).toThrow(SnapshotWriteFencedError);

    const offsets = new CommittedOffsets(kafka.client);
    const reader = new KafkaSnapshotBackend<Events>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic });
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('3');
      expect((await snapshotsOf(reader)).get('k')).toEqual({ offset: '2', state: { events: range(1, 3) } });
    } finally {
      await closeAll(() => offsets.close(), () => reader.close());
    }
  });
});
