// A hanging transaction on the real broker: a transaction of the partition's producer id left open
// on the snapshot partition and, with a pending offset commit, on the group's offsets partition,
// although its coordinator holds nothing open — what Kafka 4.3.1 leaves behind when it is killed
// between a transaction's PrepareAbort and its markers (the coordinator, restarted, skips markers
// for partitions whose leader it does not know yet). Made here the only way a client can: with the
// broker's transaction verification off for a moment, a Produce and a TxnOffsetCommit of the
// producer's id that no AddPartitionsToTxn / AddOffsetsToTxn registered. Until it is aborted,
// OffsetFetch(require_stable) answers UNSTABLE_OFFSET_COMMIT and read_committed readers of the
// snapshot partition stop at its first offset — for good. The next owner's fence finds and aborts
// it, and the partition recovers and goes on. A transaction its coordinator had committed is
// committed on the partition that missed its marker instead (the broker skips the markers of a
// commit as well as of an abort).
import { ConfigResourceTypes } from 'kafkajs';
import { Registry } from 'prom-client';
import { ManualClock } from '../../../flow/clock';
import { PartitionFlow } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { protocolErrorType } from '../../../kafka/errors';
import { createCluster, ISOLATION } from '../../../kafka/internals';
import { snapshotTransactionalId } from '../../../kafka/transactional-writer';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { kafkaScope, unique, waitFor } from '../../support/servers';
import { type Events, eventsFold, snapshotsOf, textCodec } from './harness';

const VERIFICATION = 'transaction.partition.verification.enable';

describe.each([1, 2] as const)('a hanging transaction of the partition producer, on the real broker (owner on transaction version %s)', (transactionVersion) => {
  const kafka = kafkaScope('hanging');

  /** A partition whose first owner folded e0, e1 and committed them; the tools to make a transaction hang. */
  async function committedPartition() {
    const input = await kafka.topic('input', 1);
    const snapshotTopic = kafka.topicName('snapshots');
    const groupId = unique('group');
    const prefix = unique('app');
    const m = await kafka.member({ groupId }, input);
    await m.membership.waitForJoin(30_000);
    const registry = new Registry();
    const backendFor = () => {
      const backend = new KafkaSnapshotBackend<Events, string>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic, transactional: true, transactionalIdPrefix: prefix, transactionVersion, metrics: { registry } });
      kafka.defer(() => backend.close());
      return backend;
    };
    const clock = new ManualClock(0);
    const records = (from: number, values: string[]) => values.map((v, i) => ({ offset: String(from + i), key: Buffer.from('k'), value: Buffer.from(v), timestamp: '0' }));
    const owner = async (backend: KafkaSnapshotBackend<Events, string>) => {
      const persistence = await backend.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
      const flow = new PartitionFlow<Events, string>({
        flow: 'f', topic: input, partition: 0, assignedAt: String(persistence.committedOffset), fold: eventsFold, codec: textCodec, persistence, mode: 'snapshots',
        timers: timerPolicy({ persistPeriodically: { fireEvery: 0, persistEvery: 0 } }), clock,
      });
      await flow.recover();
      return flow;
    };
    const committed = async (deadlineMs: number) => {
      const offsets = new CommittedOffsets(kafka.client);
      try {
        return (await offsets.fetch(groupId, input, [0], { deadlineMs })).get(0);
      } finally {
        await offsets.close();
      }
    };
    const hangingOutcomes = async () => {
      const values = (await registry.getSingleMetric('kafka_flow_hanging_transactions_total')?.get())?.values ?? [];
      const count = (outcome: string) => values.filter((v) => v.labels.outcome === outcome).reduce((n, v) => n + v.value, 0);
      return { aborted: count('aborted'), committed: count('committed'), refused: count('refused') };
    };

    const flow = await owner(backendFor());
    await flow.handleBatch(records(0, ['e0', 'e1']));
    await flow.persist(clock.now(), 'periodic');
    expect(await committed(10_000)).toBe('2');

    const admin = kafka.client.kafka.admin();
    await admin.connect();
    kafka.defer(() => admin.disconnect());
    const broker1 = String((await admin.describeCluster()).brokers[0]!.nodeId);
    const verification = async () =>
      (await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.BROKER, name: broker1, configNames: [VERIFICATION] }] })).resources[0]!.configEntries[0]!.configValue;
    // A dynamic setting of the (test) broker, in force once it reports it; 'true' removes the override.
    const setVerification = async (value: 'true' | 'false') => {
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.BROKER, name: broker1, configEntries: value === 'false' ? [{ name: VERIFICATION, value }] : [] }] });
      await waitFor(`${VERIFICATION}=${value}`, async () => (await verification()) === value, 10_000);
    };
    expect(await verification()).toBe('true');
    const cluster = createCluster(kafka.client, ISOLATION.READ_COMMITTED);
    await cluster.connect();
    kafka.defer(() => cluster.disconnect());
    await cluster.addTargetTopic(snapshotTopic);
    const transactionalId = snapshotTransactionalId(prefix, 0);
    /** With verification off for the call: writes of `identity` that no AddPartitionsToTxn / AddOffsetsToTxn registered. */
    const unregistered = async (identity: { producerId: string; producerEpoch: number }, what: { snapshot: boolean; offset: string }) => {
      await setVerification('false');
      try {
        if (what.snapshot) {
          const leader = Object.keys(cluster.findLeaderForPartitions(snapshotTopic, [0]))[0]!;
          const broker = (await cluster.findBroker({ nodeId: leader })) as unknown as { produce(request: unknown): Promise<unknown> };
          await broker.produce({
            transactionalId, producerId: identity.producerId, producerEpoch: identity.producerEpoch, acks: -1, timeout: 10_000,
            topicData: [{ topic: snapshotTopic, partitions: [{ partition: 0, firstSequence: 0, messages: [{ key: 'k', value: 'never committed' }] }] }],
          });
        }
        const coordinator = (await cluster.findGroupCoordinator({ groupId })) as unknown as { txnOffsetCommit(request: unknown): Promise<unknown> };
        const generation = m.membership.current()!;
        await coordinator.txnOffsetCommit({
          transactionalId, groupId, producerId: identity.producerId, producerEpoch: identity.producerEpoch, generationId: generation.generationId, memberId: generation.memberId,
          topics: [{ topic: input, partitions: [{ partition: 0, offset: what.offset }] }],
        });
      } finally {
        await setVerification('true');
      }
    };
    return { kafka, transactionalId, backendFor, owner, committed, hangingOutcomes, unregistered, records, clock };
  }

  it("nothing ongoing at the coordinator: the next owner's fence aborts it — the offsets are stable again, the snapshots readable, and the partition goes on", async () => {
    const p = await committedPartition();
    // The producer id initialized (fencing the first owner), then a snapshot record and an offset
    // commit (offset 99) of its epoch that nothing registered: the coordinator holds nothing open.
    const producer = kafka.client.kafka.producer({ transactionalId: p.transactionalId, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await (await producer.transaction()).abort();
    const identity = producer.producerIdentity()!;
    await producer.disconnect();
    await p.unregistered(identity, { snapshot: true, offset: '99' });
    // It hangs: the group's offset stays unstable (and would for good).
    const unstable = await p.committed(3_000).then(() => 'stable', (err) => protocolErrorType(err));
    expect(unstable).toBe('UNSTABLE_OFFSET_COMMIT');

    // The next owner: its fence finds the transaction open on both partitions and aborts it there.
    const next = p.backendFor();
    const started = Date.now();
    const recovered = await p.owner(next);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(recovered.stateOf('k')).toEqual({ events: ['e0', 'e1'] });
    expect(await p.committed(3_000)).toBe('2'); // the hanging commit of 99 was aborted, not applied
    expect(await p.hangingOutcomes()).toEqual({ aborted: 2, committed: 0, refused: 0 });

    // And goes on.
    await recovered.handleBatch(p.records(2, ['e2']));
    await recovered.persist(p.clock.now(), 'periodic');
    expect(await p.committed(10_000)).toBe('3');
    expect((await snapshotsOf(next)).get('k')).toEqual({ offset: '2', state: { events: ['e0', 'e1', 'e2'] } });
  }, 120_000);

  it("committed at the coordinator, its marker missing on the group's offsets partition: the next owner's fence commits it there", async () => {
    const p = await committedPartition();
    // A transaction of the partition's producer that its coordinator commits (a record to a scratch
    // topic, registered), carrying an offset commit (99) that nothing registered: the coordinator
    // writes its COMMIT marker everywhere but on the offsets partition — as the broker does when it
    // skips a commit's markers after a restart.
    const scratch = await kafka.topic('scratch', 1);
    const producer = kafka.client.kafka.producer({ transactionalId: p.transactionalId, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const transaction = await producer.transaction();
    await transaction.send({ topic: scratch, messages: [{ key: 'x', value: 'committed' }] });
    await p.unregistered(producer.producerIdentity()!, { snapshot: false, offset: '99' });
    await transaction.commit();
    await producer.disconnect();
    const unstable = await p.committed(3_000).then(() => 'stable', (err) => protocolErrorType(err));
    expect(unstable).toBe('UNSTABLE_OFFSET_COMMIT');

    // The next owner's fence commits it, as its coordinator decided: the group's offset is 99.
    await p.owner(p.backendFor());
    expect(await p.committed(3_000)).toBe('99');
    expect(await p.hangingOutcomes()).toEqual({ aborted: 0, committed: 1, refused: 0 });
  }, 120_000);
});
