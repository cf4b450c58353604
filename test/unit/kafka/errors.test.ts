import { KafkaFlowError } from '../../../config/errors';
import { fenceReason, SnapshotWriteFencedError as KafkaFenced, SnapshotWriteFencedError } from '../../../kafka/errors';
import { SnapshotWriteFencedError as PersistenceFenced } from '../../../core/fence-errors';
import { createErrorFromCode } from '../../../kafka/internals';

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
