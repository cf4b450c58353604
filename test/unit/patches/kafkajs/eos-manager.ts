/**
 * The patched kafkajs transaction manager (eosManager), for tests that drive it against a fake
 * cluster of coordinators: its factory, the methods those tests call, kafkajs's protocol errors by
 * code and a silent logger.
 */
import { kafkajsModule } from './wire';

export type EosManager = {
  initProducerId(): Promise<void>;
  beginTransaction(): void;
  addPartitionsToTransaction(topics: Array<{ topic: string; partitions: Array<{ partition: number }> }>): Promise<void>;
  addOffsetsToTransaction(groupId: string): Promise<void>;
  sendOffsets(args: Record<string, unknown>): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
  getProducerId(): number | string;
  getProducerEpoch(): number;
  getSequence(topic: string, partition: number): number;
  updateSequence(topic: string, partition: number, increment: number): void;
  getTransactionVersion(): 2 | undefined;
};

export const createEosManager = kafkajsModule<(args: Record<string, unknown>) => EosManager>('producer/eosManager');
export const { createErrorFromCode } = kafkajsModule<{ createErrorFromCode(code: number): Error }>('protocol/error');
/** Which coordinator `cluster.findGroupCoordinator` is asked for. */
export const COORDINATOR_TYPES = kafkajsModule<{ GROUP: number; TRANSACTION: number }>('protocol/coordinatorTypes');

/** kafkajs error codes the tests answer with. */
export const ERROR_CODES = { NOT_COORDINATOR: 16, INVALID_PRODUCER_EPOCH: 47, CONCURRENT_TRANSACTIONS: 51 } as const;

type SilentLogger = Record<'debug' | 'info' | 'warn' | 'error', () => void> & { namespace(): SilentLogger };
export const silentKafkaLogger: SilentLogger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  namespace() {
    return silentKafkaLogger;
  },
};
