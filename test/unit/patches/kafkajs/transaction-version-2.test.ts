// kafkajs's transaction manager (eosManager) on transaction version 2 (KIP-890 part 2), patched:
// decided at the producer's initialization from the transaction coordinator's finalized
// `transaction.version` and request versions; then no AddPartitionsToTxn and no AddOffsetsToTxn
// (Produce v12 and TxnOffsetCommit v5 add their partitions), EndTxn v5's answer is the epoch of the
// next transaction (sequences start again at 0), and TxnOffsetCommit's CONCURRENT_TRANSACTIONS is
// retried with the producer's retry. Driven with a fake cluster.
import { COORDINATOR_TYPES, createEosManager, createErrorFromCode, ERROR_CODES, silentKafkaLogger as silent } from './eos-manager';

const V2_BROKER_VERSIONS = Object.defineProperty(
  { 0: { minVersion: 3, maxVersion: 13 }, 26: { minVersion: 0, maxVersion: 5 }, 28: { minVersion: 0, maxVersion: 5 } },
  'finalizedFeatures',
  { value: { 'transaction.version': 2 }, enumerable: false },
);

function fakeCluster(versions: object) {
  const calls: Array<{ request: string; transactionVersion?: number; producerEpoch?: number }> = [];
  const txnOffsetCommitFailures: number[] = [];
  let epoch = 1;
  const transactionCoordinator = {
    nodeId: 1,
    versions,
    initProducerId: async () => ({ producerId: '42', producerEpoch: epoch }),
    addPartitionsToTxn: async () => void calls.push({ request: 'AddPartitionsToTxn' }),
    addOffsetsToTxn: async () => void calls.push({ request: 'AddOffsetsToTxn' }),
    endTxn: async ({ transactionVersion, producerEpoch }: { transactionVersion?: number; producerEpoch: number }) => {
      calls.push({ request: 'EndTxn', transactionVersion, producerEpoch });
      if (transactionVersion !== 2) return { errorCode: 0 };
      epoch += 1;
      return { errorCode: 0, producerId: '42', producerEpoch: epoch };
    },
  };
  const groupCoordinator = {
    nodeId: 2,
    versions,
    txnOffsetCommit: async ({ transactionVersion, producerEpoch }: { transactionVersion?: number; producerEpoch: number }) => {
      calls.push({ request: 'TxnOffsetCommit', transactionVersion, producerEpoch });
      const code = txnOffsetCommitFailures.shift();
      if (code !== undefined) throw createErrorFromCode(code);
    },
  };
  const cluster = {
    retry: { retries: 5, initialRetryTime: 300, maxRetryTime: 1000 }, // the client's: slow on purpose
    refreshMetadataIfNecessary: async () => {},
    findGroupCoordinator: async ({ coordinatorType }: { coordinatorType: number }) =>
      coordinatorType === COORDINATOR_TYPES.TRANSACTION ? transactionCoordinator : groupCoordinator,
    findBroker: async ({ nodeId }: { nodeId: number }) => (nodeId === 1 ? transactionCoordinator : groupCoordinator),
  };
  return { cluster, calls, txnOffsetCommitFailures };
}

const manager = (cluster: object, transactionVersion?: 1 | 2) =>
  createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx', addRetry: { retries: 5, initialRetryTime: 1 }, transactionVersion });

const offsets = [{ topic: 'in', partitions: [{ partition: 0, offset: '5' }] }];

describe('transaction version 2 (patched eosManager)', () => {
  it('registers nothing ahead, commits offsets with v5, and takes the bumped epoch (sequences from 0) from each EndTxn', async () => {
    const { cluster, calls } = fakeCluster(V2_BROKER_VERSIONS);
    const eos = manager(cluster);
    await eos.initProducerId();
    expect(eos.getTransactionVersion()).toBe(2);
    for (let i = 0; i < 2; i++) {
      eos.beginTransaction();
      await eos.addPartitionsToTransaction([{ topic: 'snapshots', partitions: [{ partition: 0 }] }]);
      await eos.addOffsetsToTransaction('g');
      eos.updateSequence('snapshots', 0, 3); // a Produce of 3 records
      await eos.sendOffsets({ consumerGroupId: 'g', topics: offsets, generationId: 3, memberId: 'm' });
      await eos.commit();
      expect(eos.getSequence('snapshots', 0)).toBe(0);
    }
    expect(calls).toEqual([
      { request: 'TxnOffsetCommit', transactionVersion: 2, producerEpoch: 1 },
      { request: 'EndTxn', transactionVersion: 2, producerEpoch: 1 },
      { request: 'TxnOffsetCommit', transactionVersion: 2, producerEpoch: 2 },
      { request: 'EndTxn', transactionVersion: 2, producerEpoch: 2 },
    ]);
    expect(eos.getProducerEpoch()).toBe(3);
  });

  it('an epoch that would overflow comes back as a new producer id at epoch 0, which the next transaction uses', async () => {
    const { cluster, calls } = fakeCluster(V2_BROKER_VERSIONS);
    const coordinator = await cluster.findBroker({ nodeId: 1 });
    (coordinator as { endTxn: unknown }).endTxn = async ({ producerEpoch }: { producerEpoch: number }) => {
      calls.push({ request: 'EndTxn', producerEpoch });
      return { errorCode: 0, producerId: '43', producerEpoch: 0 };
    };
    const eos = manager(cluster);
    await eos.initProducerId();
    eos.beginTransaction();
    await eos.addPartitionsToTransaction([{ topic: 'snapshots', partitions: [{ partition: 0 }] }]);
    eos.updateSequence('snapshots', 0, 2);
    await eos.commit();
    expect(eos.getProducerId()).toBe('43');
    expect(eos.getProducerEpoch()).toBe(0);
    expect(eos.getSequence('snapshots', 0)).toBe(0);
  });

  it('an abort ends the transaction with v5 too, and its epoch is taken', async () => {
    const { cluster, calls } = fakeCluster(V2_BROKER_VERSIONS);
    const eos = manager(cluster);
    await eos.initProducerId();
    eos.beginTransaction();
    await eos.addPartitionsToTransaction([{ topic: 'snapshots', partitions: [{ partition: 0 }] }]);
    await eos.abort();
    expect(calls).toEqual([{ request: 'EndTxn', transactionVersion: 2, producerEpoch: 1 }]);
    expect(eos.getProducerEpoch()).toBe(2);
  });

  it("retries TxnOffsetCommit's CONCURRENT_TRANSACTIONS with the producer's retry (ms), not the client's (300 ms)", async () => {
    const { cluster, calls, txnOffsetCommitFailures } = fakeCluster(V2_BROKER_VERSIONS);
    const eos = manager(cluster);
    await eos.initProducerId();
    txnOffsetCommitFailures.push(ERROR_CODES.CONCURRENT_TRANSACTIONS, ERROR_CODES.CONCURRENT_TRANSACTIONS);
    eos.beginTransaction();
    const started = Date.now();
    await eos.sendOffsets({ consumerGroupId: 'g', topics: offsets, generationId: 3, memberId: 'm' });
    expect(Date.now() - started).toBeLessThan(250);
    expect(calls.filter((c) => c.request === 'TxnOffsetCommit')).toHaveLength(3);
  });

  it('transactionVersion 1 keeps the classic protocol on a cluster that speaks 2', async () => {
    const { cluster, calls } = fakeCluster(V2_BROKER_VERSIONS);
    const eos = manager(cluster, 1);
    await eos.initProducerId();
    expect(eos.getTransactionVersion()).toBeUndefined();
    eos.beginTransaction();
    await eos.addPartitionsToTransaction([{ topic: 'snapshots', partitions: [{ partition: 0 }] }]);
    await eos.addOffsetsToTransaction('g');
    await eos.commit();
    expect(calls.map((c) => c.request)).toEqual(['AddPartitionsToTxn', 'AddOffsetsToTxn', 'EndTxn']);
    expect(eos.getProducerEpoch()).toBe(1);
  });

  it.each([
    ['transaction.version finalized at 1', Object.defineProperty({ ...V2_BROKER_VERSIONS }, 'finalizedFeatures', { value: { 'transaction.version': 1 } })],
    ['no finalized features (ApiVersions < v3)', { ...V2_BROKER_VERSIONS }],
    ['EndTxn v4 at most', Object.defineProperty({ ...V2_BROKER_VERSIONS, 26: { minVersion: 0, maxVersion: 4 } }, 'finalizedFeatures', { value: { 'transaction.version': 2 } })],
  ])('auto on a cluster without it (%s): classic; asking for 2 fails the initialization', async (_, versions) => {
    const eos = manager(fakeCluster(versions).cluster);
    await eos.initProducerId();
    expect(eos.getTransactionVersion()).toBeUndefined();
    await expect(manager(fakeCluster(versions).cluster, 2).initProducerId()).rejects.toThrow(/Transaction version 2 was asked for/);
  });
});
