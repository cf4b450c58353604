// kafkajs's transaction manager (eosManager), patched: AddOffsetsToTxn is retried on
// CONCURRENT_TRANSACTIONS, and sendOffsets carries the KIP-447 generation and member id down to
// TxnOffsetCommit. Driven with a fake cluster: this is the client's logic, not the broker's.
import { COORDINATOR_TYPES, createEosManager, createErrorFromCode, ERROR_CODES, type EosManager, silentKafkaLogger as silent } from './eos-manager';

function fakeCluster(addOffsetsFailures: number[]) {
  const calls = { addOffsetsToTxn: 0, txnOffsetCommit: [] as Array<Record<string, unknown>> };
  const transactionCoordinator = {
    initProducerId: async () => ({ producerId: 42, producerEpoch: 1 }),
    addOffsetsToTxn: async () => {
      const code = addOffsetsFailures[calls.addOffsetsToTxn++];
      if (code !== undefined) throw createErrorFromCode(code);
    },
  };
  const groupCoordinator = {
    txnOffsetCommit: async (args: Record<string, unknown>) => {
      calls.txnOffsetCommit.push(args);
    },
  };
  const cluster = {
    retry: { retries: 5, initialRetryTime: 1, maxRetryTime: 20 },
    refreshMetadataIfNecessary: async () => {},
    findGroupCoordinator: async ({ coordinatorType }: { coordinatorType: number }) =>
      coordinatorType === COORDINATOR_TYPES.TRANSACTION ? transactionCoordinator : groupCoordinator,
  };
  return { cluster, calls };
}

async function transaction(cluster: unknown): Promise<EosManager> {
  const eos = createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx' });
  await eos.initProducerId();
  eos.beginTransaction();
  return eos;
}

const topics = [{ topic: 't', partitions: [{ partition: 0, offset: '5' }] }];
const { CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_EPOCH } = ERROR_CODES;

describe('sendOffsets (patched eosManager)', () => {
  it('retries AddOffsetsToTxn on CONCURRENT_TRANSACTIONS, then commits the offsets with the generation', async () => {
    const { cluster, calls } = fakeCluster([CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS]);
    const eos = await transaction(cluster);
    await eos.sendOffsets({ consumerGroupId: 'g', topics, generationId: 7, memberId: 'm-1' });
    expect(calls.addOffsetsToTxn).toBe(3);
    expect(calls.txnOffsetCommit).toEqual([
      expect.objectContaining({
        transactionalId: 'tx',
        groupId: 'g',
        producerId: 42,
        producerEpoch: 1,
        generationId: 7,
        memberId: 'm-1',
        topics,
      }),
    ]);
  });

  it('does not retry a fence', async () => {
    const { cluster, calls } = fakeCluster([INVALID_PRODUCER_EPOCH]);
    const eos = await transaction(cluster);
    await expect(eos.sendOffsets({ consumerGroupId: 'g', topics })).rejects.toMatchObject({
      type: 'INVALID_PRODUCER_EPOCH',
    });
    expect(calls.addOffsetsToTxn).toBe(1);
    expect(calls.txnOffsetCommit).toEqual([]);
  });

  it('knows PRODUCER_FENCED (90) as a non-retriable error', () => {
    expect(createErrorFromCode(90)).toMatchObject({ type: 'PRODUCER_FENCED', code: 90, retriable: false });
  });
});
