// kafkajs's transaction manager (eosManager), patched: coordinators are found once and kept until a
// request to one fails the way a moved or unreachable coordinator does (unpatched, every
// coordinator request of a transaction was preceded by a FindCoordinator round trip: four per
// transaction); partitions and a group's offsets can be registered ahead of the records and
// offsets (AddPartitionsToTxn and AddOffsetsToTxn once per transaction), and those registrations
// are retried on CONCURRENT_TRANSACTIONS with the producer's retry. Driven with a fake cluster.
import { COORDINATOR_TYPES, createEosManager, createErrorFromCode, ERROR_CODES, type EosManager, silentKafkaLogger as silent } from './eos-manager';

const { NOT_COORDINATOR, CONCURRENT_TRANSACTIONS } = ERROR_CODES;

function fakeCluster() {
  const calls = { find: 0, findBroker: 0, addPartitionsToTxn: 0, addOffsetsToTxn: 0, txnOffsetCommit: 0, endTxn: 0 };
  const failures: Record<string, number[]> = { endTxn: [], addPartitionsToTxn: [] };
  const fail = (request: keyof typeof failures) => {
    const code = failures[request]!.shift();
    if (code !== undefined) throw createErrorFromCode(code);
  };
  const transactionCoordinator = {
    nodeId: 1,
    initProducerId: async () => ({ producerId: 42, producerEpoch: 1 }),
    addPartitionsToTxn: async () => {
      calls.addPartitionsToTxn++;
      fail('addPartitionsToTxn');
    },
    addOffsetsToTxn: async () => {
      calls.addOffsetsToTxn++;
    },
    endTxn: async () => {
      calls.endTxn++;
      fail('endTxn');
    },
  };
  const groupCoordinator = {
    nodeId: 2,
    txnOffsetCommit: async () => {
      calls.txnOffsetCommit++;
    },
  };
  const brokers = new Map<number, unknown>([
    [1, transactionCoordinator],
    [2, groupCoordinator],
  ]);
  const cluster = {
    // the client's retry: slow on purpose, the registrations must not use it
    retry: { retries: 5, initialRetryTime: 300, maxRetryTime: 1000 },
    refreshMetadataIfNecessary: async () => {},
    findGroupCoordinator: async ({ coordinatorType }: { coordinatorType: number }) => {
      calls.find++;
      return coordinatorType === COORDINATOR_TYPES.TRANSACTION ? transactionCoordinator : groupCoordinator;
    },
    findBroker: async ({ nodeId }: { nodeId: number }) => {
      calls.findBroker++;
      const broker = brokers.get(nodeId);
      if (!broker) throw new Error(`broker ${nodeId} not found`);
      return broker;
    },
  };
  return { cluster, calls, failures };
}

const offsets = [{ topic: 'in', partitions: [{ partition: 0, offset: '5' }] }];
const partitions = [{ topic: 'snapshots', partitions: [{ partition: 0 }] }];

async function oneTransaction(eos: EosManager): Promise<void> {
  eos.beginTransaction();
  await Promise.all([eos.addPartitionsToTransaction(partitions), eos.addOffsetsToTransaction('g')]);
  await eos.sendOffsets({ consumerGroupId: 'g', topics: offsets, generationId: 3, memberId: 'm' });
  await eos.commit();
}

describe('coordinators and registrations (patched eosManager)', () => {
  it('finds each coordinator once for many transactions, registering partitions and offsets once per transaction', async () => {
    const { cluster, calls } = fakeCluster();
    const eos = createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx', addRetry: { retries: 5, initialRetryTime: 1 } });
    await eos.initProducerId();
    for (let i = 0; i < 3; i++) await oneTransaction(eos);
    expect(calls.find).toBe(2); // the transaction coordinator once, the group coordinator once
    expect(calls).toMatchObject({ addPartitionsToTxn: 3, addOffsetsToTxn: 3, txnOffsetCommit: 3, endTxn: 3 });
  });

  it('finds the coordinator again after NOT_COORDINATOR', async () => {
    const { cluster, calls, failures } = fakeCluster();
    const eos = createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx', addRetry: { retries: 5, initialRetryTime: 1 } });
    await eos.initProducerId();
    await oneTransaction(eos);
    expect(calls.find).toBe(2);
    failures.addPartitionsToTxn!.push(NOT_COORDINATOR);
    await expect(oneTransaction(eos)).rejects.toThrow(/not the correct coordinator/);
    await eos.abort(); // EndTxn: to a coordinator found anew
    expect(calls.find).toBe(3);
    expect(calls.endTxn).toBe(2);
  });

  it('retries a registration on CONCURRENT_TRANSACTIONS with the producer retry, not the client one', async () => {
    const { cluster, calls, failures } = fakeCluster();
    failures.addPartitionsToTxn!.push(CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS);
    const eos = createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx', addRetry: { retries: 5, initialRetryTime: 1, maxRetryTime: 5 } });
    await eos.initProducerId();
    const started = Date.now();
    await oneTransaction(eos);
    expect(calls.addPartitionsToTxn).toBe(3);
    expect(Date.now() - started).toBeLessThan(250); // the client's 300 ms first retry would exceed it
  });
});
