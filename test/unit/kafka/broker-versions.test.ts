// Transactional mode needs TxnOffsetCommit v3 (KIP-447, Kafka 2.5+) to fence stale owners by
// consumer generation. We cannot run a Kafka older than 2.5 here, so the old broker is a fake
// ApiVersions answer (the real broker's answer is checked in test/integration/security/).
import { BrokerTooOldError, requireFencedTxnOffsetCommit, requireTransactionVersion2, TransactionVersionUnavailableError } from '../../../kafka/broker-versions';
import { speaksTransactionVersion2, transactionVersion2Missing } from '../../../kafka/protocol/transaction-version';
import { negotiatedVersion } from '../patches/kafkajs/wire';

const TXN_OFFSET_COMMIT = 28;
/** TxnOffsetCommit ranges in ApiVersions answers: Kafka 2.4 stops at v2, 2.5 adds v3, 4.3 goes to v5. */
const KAFKA_2_4 = { [TXN_OFFSET_COMMIT]: { minVersion: 0, maxVersion: 2 } };
const KAFKA_2_5 = { [TXN_OFFSET_COMMIT]: { minVersion: 0, maxVersion: 3 } };
const KAFKA_4_3 = { [TXN_OFFSET_COMMIT]: { minVersion: 0, maxVersion: 5 } };

describe('TxnOffsetCommit v3 is required for transactional persistence', () => {
  it('a Kafka 2.4 broker is refused with BrokerTooOldError (kafkajs would silently send v1, which carries no generation)', () => {
    expect(negotiatedVersion(KAFKA_2_4, TXN_OFFSET_COMMIT, 'TxnOffsetCommit')).toBe(1);
    let err: unknown;
    try {
      requireFencedTxnOffsetCommit(KAFKA_2_4, 'old-broker:9092');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BrokerTooOldError);
    expect((err as BrokerTooOldError).code).toBe('BROKER_TOO_OLD');
    expect((err as Error).message).toMatch(/old-broker:9092 supports TxnOffsetCommit up to v2, but transactional persistence needs v3 \(KIP-447, Kafka 2.5 or later\)/);
  });

  it('a broker that does not list TxnOffsetCommit at all is refused', () => {
    expect(() => requireFencedTxnOffsetCommit({}, 'b:1')).toThrow(/up to \(none\)/);
  });

  it('Kafka 2.5 and 4.3 are accepted', () => {
    expect(() => requireFencedTxnOffsetCommit(KAFKA_2_5, 'b:1')).not.toThrow();
    expect(() => requireFencedTxnOffsetCommit(KAFKA_4_3, 'b:1')).not.toThrow();
  });
});

describe('a required transaction version 2 (KAFKA_TRANSACTION_VERSION=2)', () => {
  const withFeatures = (versions: object, level?: number) =>
    Object.defineProperty({ ...versions }, 'finalizedFeatures', { value: level === undefined ? {} : { 'transaction.version': level }, enumerable: false });
  const KAFKA_4 = { 0: { minVersion: 3, maxVersion: 13 }, 26: { minVersion: 0, maxVersion: 5 }, 28: { minVersion: 0, maxVersion: 5 } };
  const KAFKA_3_9 = { 0: { minVersion: 0, maxVersion: 11 }, 26: { minVersion: 0, maxVersion: 4 }, 28: { minVersion: 0, maxVersion: 4 } };

  it('a Kafka 4 cluster that finalizes transaction.version 2 speaks it', () => {
    expect(transactionVersion2Missing(withFeatures(KAFKA_4, 2))).toEqual([]);
    expect(speaksTransactionVersion2(withFeatures(KAFKA_4, 2))).toBe(true);
    expect(() => requireTransactionVersion2(withFeatures(KAFKA_4, 2), 'b:1')).not.toThrow();
  });

  it('is refused with TransactionVersionUnavailableError naming what is missing and what to do', () => {
    expect(transactionVersion2Missing(withFeatures(KAFKA_4, 1))).toEqual(['transaction.version finalized at 1']);
    expect(transactionVersion2Missing(withFeatures(KAFKA_3_9))).toEqual(['transaction.version finalized at 0', 'Produce v12', 'EndTxn v5', 'TxnOffsetCommit v5']);
    let err: unknown;
    try {
      requireTransactionVersion2(withFeatures(KAFKA_4, 1), 'b:9092');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TransactionVersionUnavailableError);
    expect((err as TransactionVersionUnavailableError).code).toBe('TRANSACTION_VERSION_UNAVAILABLE');
    expect((err as Error).message).toMatch(/KAFKA_TRANSACTION_VERSION=2 .* b:9092 does not speak \(transaction.version finalized at 1\); unset KAFKA_TRANSACTION_VERSION .* or set it to 1/);
  });

  it('versions without finalized features (an ApiVersions answer before v3) do not speak it', () => {
    expect(speaksTransactionVersion2({ ...KAFKA_4 })).toBe(false);
  });
});
