import { KafkaFlowError } from '../../../config/errors';
import * as kafkajs from 'kafkajs';
import { KafkaJSConnectionError, KafkaJSNonRetriableError, KafkaJSRequestTimeoutError } from 'kafkajs';
import { commitFailureOutcome, fenceReason, SnapshotCommitTimeoutError, SnapshotWriteFencedError as KafkaFenced, SnapshotWriteFencedError } from '../../../kafka/errors';
import { SnapshotWriteFencedError as PersistenceFenced } from '../../../core/fence-errors';
import { createErrorFromCode } from '../../../kafka/internals';

// Exported by kafkajs, missing from its typings.
const { KafkaJSConnectionClosedError } = kafkajs as unknown as { KafkaJSConnectionClosedError: new (message: string, o: { host: string; port: number }) => Error };

describe('fence mapping', () => {
  it.each([
    [22, 'generation'],
    [25, 'member'],
    [47, 'producer-epoch'],
    [90, 'producer-epoch'],
  ] as const)('kafkajs protocol error %i is a %s fence', (code, reason) => {
    const err = createErrorFromCode(code);
    expect(fenceReason(err)).toBe(reason);
  });

  it.each([16, 51, 88, 7])('error %i is not a fence', (code) => {
    expect(fenceReason(createErrorFromCode(code))).toBeUndefined();
  });

  it('sees a fence through kafkajs retry wrappers (cause chains)', () => {
    const wrapped = Object.assign(new Error('retries exceeded'), {
      name: 'KafkaJSNumberOfRetriesExceeded',
      cause: createErrorFromCode(47),
    });
    expect(fenceReason(wrapped)).toBe('producer-epoch');
    expect(fenceReason(new Error('ECONNREFUSED'))).toBeUndefined();
    expect(fenceReason(undefined)).toBeUndefined();
  });

  it('SnapshotWriteFencedError is a KafkaFlowError with code FENCED, the reason and the transactional id', () => {
    const cause = createErrorFromCode(22);
    const err = new SnapshotWriteFencedError('input', 3, 'ILLEGAL_GENERATION', { reason: 'generation', transactionalId: 'app-snapshot-3', cause });
    expect(err).toBeInstanceOf(KafkaFlowError);
    expect(err).toMatchObject({ code: 'FENCED', topic: 'input', partition: 3, reason: 'generation', transactionalId: 'app-snapshot-3', cause });
    expect(err.name).toBe('SnapshotWriteFencedError');
    expect(err.message).toContain('app-snapshot-3');
  });

  it('there is one SnapshotWriteFencedError: the Kafka port throws the persistence port\'s class', () => {
    expect(KafkaFenced).toBe(PersistenceFenced);
    const plain = new PersistenceFenced('t', 0, 'the persist was fenced');
    expect(plain).toMatchObject({ code: 'FENCED', reason: undefined, transactionalId: undefined });
  });
});

describe('a failed EndTxn(commit): refused, or outcome unknown', () => {
  it.each([47, 90])('protocol error %i (a newer producer epoch) refused it: nothing landed', (code) => {
    expect(commitFailureOutcome(createErrorFromCode(code))).toBe('refused');
    expect(commitFailureOutcome(Object.assign(new Error('retries exceeded'), { cause: createErrorFromCode(code) }))).toBe('refused');
  });

  it.each([
    ['the connection closed after the request went out', new KafkaJSConnectionClosedError('Closed connection', { host: '127.0.0.1', port: 9092 })],
    ['the request timed out', new KafkaJSRequestTimeoutError('Request EndTxn(key: 26, version: 1) timed out', { broker: '127.0.0.1:9092', clientId: 'c', correlationId: 9, createdAt: 0, sentAt: 0, pendingDuration: 0 })],
    ['the connection failed', new KafkaJSConnectionError('Connection error: read ECONNRESET', { broker: '127.0.0.1:9092', code: 'ECONNRESET' })],
    // The coordinator answers this when its log append timed out, PrepareCommit possibly written.
    ['COORDINATOR_NOT_AVAILABLE', createErrorFromCode(15)],
    ['NOT_COORDINATOR', createErrorFromCode(16)],
    ['CONCURRENT_TRANSACTIONS', createErrorFromCode(51)],
    ['a kafkajs state error', new KafkaJSNonRetriableError('Transaction state exception: Invalid transition')],
    ['a plain error', new Error('socket hang up')],
  ])('%s: unknown — settled before anything it carried is written again', (_what, err) => {
    expect(commitFailureOutcome(err)).toBe('unknown');
  });

  it('SnapshotCommitTimeoutError says whether the timeout ran out or the request failed, and keeps what was sent', () => {
    const sent = [{ topic: 's', partition: 0, baseOffset: '5', count: 2 }];
    const timedOut = new SnapshotCommitTimeoutError('app-snapshot-0', 30_000, { sent });
    expect(timedOut).toMatchObject({ code: 'COMMIT_TIMEOUT', timeoutMs: 30_000, sent });
    expect(timedOut.message).toMatch(/got no answer within 30000 ms; outcome unknown/);
    const cause = new KafkaJSConnectionClosedError('Closed connection', { host: '127.0.0.1', port: 9092 });
    const cut = new SnapshotCommitTimeoutError('app-snapshot-0', undefined, { cause, sent });
    expect(cut).toMatchObject({ code: 'COMMIT_TIMEOUT', timeoutMs: undefined, sent, cause });
    expect(cut.message).toMatch(/got no answer \(KafkaJSConnectionClosedError: Closed connection\); outcome unknown/);
  });
});
