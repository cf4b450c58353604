// What of a record may reach a message, a log line or a Temporal failure (core/redact): nothing of
// its key or value unless the flow has logKeys. Errors of user code (a fold's, a filter's, a
// codec's) are withheld, keeping their class name; this project's errors, the Kafka client's and
// Node's system errors are shown.
import { ApplicationFailure, asyncLocalStorage, Context } from '@temporalio/activity';
import { CancelledFailure, DefaultFailureConverter } from '@temporalio/common';
import { KafkaJSConnectionError, KafkaJSNonRetriableError } from 'kafkajs';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createFlowActivities } from '../../../activities/flow-activities';
import type { PartitionHost } from '../../../activities/partition-host';
import { FailureTypes, type OwnerRequest } from '../../../activities/types';
import { ClosedError, InternalError, KafkaFlowError } from '../../../config/errors';
import { redactingLogger } from '../../../core/logger';
import { isSafeError, keyHash, REDACTED, setLogKeys, unredactedMessage, WithheldMessageError, withheld } from '../../../core/redact';
import { FoldError, OffsetCommitFailedError, PersistFailedError } from '../../../flow/errors';
import { DEAD_LETTER_HEADERS, deadLetter } from '../../../flow/poison';

const KEY = 'customer-4711';
const VALUE = 'card 4111-1111-1111-1111';
/** What a careless fold throws. */
const foldsOwn = () => new TypeError(`bad ${VALUE} for ${KEY}`);

/** Everything of an error a logger, JSON or Temporal could show: message, stack, fields, causes. */
function everything(err: unknown): string {
  const lines: string[] = [];
  const sink = new Writable({
    write: (chunk, _enc, done) => {
      lines.push(String(chunk));
      done();
    },
  });
  const log = pino({}, sink);
  log.error({ err }, 'failed');
  const failure = new DefaultFailureConverter().errorToFailure(err, { toPayload: (v: unknown) => ({ data: Buffer.from(JSON.stringify(v) ?? '') }) } as never);
  const e = err as Error;
  return [e.message, e.stack, JSON.stringify(err), lines.join(''), JSON.stringify(failure)].join('\n');
}

afterEach(() => setLogKeys(false));

describe('isSafeError: whose messages are known to hold nothing of a record', () => {
  test('ours, the Kafka client\'s and Node\'s system errors; a KafkaJS error caused by anything else is not', () => {
    expect(isSafeError(new FoldError('t', 0, KEY, '1', foldsOwn()))).toBe(true);
    expect(isSafeError(new KafkaFlowError('X', 'ours'))).toBe(true);
    expect(isSafeError(new KafkaJSConnectionError('Connection timeout'))).toBe(true);
    expect(isSafeError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9092'), { code: 'ECONNREFUSED', syscall: 'connect' }))).toBe(true);
    // kafkajs's retrier wraps what it retried this way: the message copied, the original as cause.
    const own = foldsOwn();
    const Wrapping = KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: unknown }) => Error;
    expect(isSafeError(new Wrapping(own, { cause: own }))).toBe(false);
    expect(isSafeError(Object.assign(new KafkaJSConnectionError('lost'), { cause: foldsOwn() }))).toBe(false);
    expect(isSafeError(foldsOwn())).toBe(false);
    expect(isSafeError(new Error('plain'))).toBe(false);
    expect(isSafeError(`bad ${VALUE}`)).toBe(false);
    expect(isSafeError(undefined)).toBe(false);
  });
});

describe('withheld', () => {
  test('without logKeys: a WithheldMessageError keeping the class name and the stack frames, the original out of sight', () => {
    const original = foldsOwn();
    const w = withheld(original) as WithheldMessageError;
    expect(w).toBeInstanceOf(WithheldMessageError);
    expect(w.code).toBe('WITHHELD');
    expect(w.originalName).toBe('TypeError');
    expect(w.message).toBe(`TypeError: ${REDACTED} (its message may quote the record; set logKeys: true on the flow to see it)`);
    expect(w.original).toBe(original);
    expect(Object.keys(w)).not.toContain('original');
    // The frames of where it was thrown (this file), under the withheld message.
    expect(w.stack).toMatch(/^WithheldMessageError: TypeError: \[redacted: logKeys is off\]/);
    expect(w.stack).toContain('redact.test.ts');
    const all = everything(w);
    expect(all).not.toContain(VALUE);
    expect(all).not.toContain(KEY);
  });

  test('a thrown value that is not an Error is withheld too (its typeof kept)', () => {
    const w = withheld(`bad ${VALUE}`) as WithheldMessageError;
    expect(w.message).toMatch(/^string: \[redacted: logKeys is off\]/);
    expect(everything(w)).not.toContain(VALUE);
  });

  test('safe errors, undefined, and anything with logKeys pass as they are', () => {
    const kafka = new KafkaJSConnectionError('Connection timeout');
    expect(withheld(kafka)).toBe(kafka);
    expect(withheld(undefined)).toBeUndefined();
    setLogKeys(true);
    const original = foldsOwn();
    expect(withheld(original)).toBe(original);
  });
});

describe('FoldError', () => {
  test('without logKeys: type, code, where, the key\'s hash and the class of the fold\'s error — nothing of the record anywhere', () => {
    const err = new FoldError('orders', 3, KEY, '42', foldsOwn());
    expect(err.name).toBe('FoldError');
    expect(err.code).toBe('FOLD_FAILED');
    expect(err.message).toContain('topic "orders" partition 3 offset 42');
    expect(err.message).toContain(`key #${keyHash(KEY)}`);
    expect(err.message).toContain(`TypeError: ${REDACTED}`);
    expect(err.cause).toBeInstanceOf(WithheldMessageError);
    expect(err.key).toBe(KEY);
    const all = everything(err);
    expect(all).not.toContain(VALUE);
    expect(all).not.toContain(KEY);
    // The message with the fold's own text stays available to the one place that may show it.
    expect(unredactedMessage(err)).toContain(`bad ${VALUE} for ${KEY}`);
  });

  test('with logKeys: the fold\'s message and the key as they are', () => {
    setLogKeys(true);
    const cause = foldsOwn();
    const err = new FoldError('orders', 3, KEY, '42', cause);
    expect(err.message).toContain(`bad ${VALUE} for ${KEY}`);
    expect(err.message).toContain(`key "${KEY}"`);
    expect(err.cause).toBe(cause);
    expect(unredactedMessage(err)).toBe(err.message);
  });

  test('an error of ours thrown inside the fold is shown (it holds nothing of the record)', () => {
    const err = new FoldError('orders', 3, KEY, '42', new KafkaFlowError('UNDECLARED_OUTPUT_TOPIC', 'ctx.emit: topic "x" is not one of the flow\'s outputTopics'));
    expect(err.message).toContain('ctx.emit: topic "x" is not one of the flow\'s outputTopics');
  });

  test('its dead letter says what the fold said: the dead letter carries the record anyway', () => {
    const err = new FoldError('orders', 3, KEY, '42', foldsOwn());
    const letter = deadLetter({ key: Buffer.from(KEY), value: Buffer.from(VALUE), offset: '42', timestamp: '0', headers: {} } as never, { flow: 'f', topic: 'orders', partition: 3, deadLetterTopic: 'dl' }, 'fold', err);
    expect(String(letter.headers?.[DEAD_LETTER_HEADERS.error])).toContain(`FoldError: the fold threw`);
    expect(String(letter.headers?.[DEAD_LETTER_HEADERS.error])).toContain(`bad ${VALUE} for ${KEY}`);
  });
});

describe('PersistFailedError and OffsetCommitFailedError', () => {
  test('the Kafka client\'s and our causes are shown; anything else (a state codec\'s error) is withheld', () => {
    expect(new PersistFailedError('t', 0, 2, new KafkaJSConnectionError('Connection timeout')).message).toContain('failed: Connection timeout.');
    const codec = new PersistFailedError('t', 0, 2, new Error(`cannot encode ${VALUE}`));
    expect(codec.code).toBe('PERSIST_FAILED');
    expect(codec.message).toContain(`Error: ${REDACTED}`);
    expect(everything(codec)).not.toContain(VALUE);
    // Our own stop races and broken invariants are typed, so an operator reads them without logKeys.
    expect(new PersistFailedError('t', 0, 2, new ClosedError('KafkaSnapshotBackend')).message).toContain('failed: KafkaSnapshotBackend is closed: the worker is stopping');
    expect(new PersistFailedError('t', 0, 2, new InternalError('no data for t/0 in Fetch response')).message).toContain('failed: no data for t/0 in Fetch response');
    const commit = new OffsetCommitFailedError('t', 0, '7', new Error(`odd ${VALUE}`));
    expect(commit.code).toBe('COMMIT_FAILED');
    expect(everything(commit)).not.toContain(VALUE);
  });
});

describe('redactingLogger', () => {
  test('withholds the err of a line that may quote a record, passes the other fields and safe errors', () => {
    const lines: unknown[] = [];
    const log = redactingLogger({ info: () => undefined, warn: () => undefined, debug: () => undefined, error: (o) => lines.push(o) });
    const original = foldsOwn();
    log.error({ err: original, topic: 't', partition: 0 }, 'partition stopped');
    const ours = new FoldError('t', 0, KEY, '1', foldsOwn());
    log.error({ err: ours }, 'partition stopped');
    log.error('just a message');
    expect(lines[0]).toMatchObject({ topic: 't', partition: 0 });
    expect((lines[0] as { err: unknown }).err).toBeInstanceOf(WithheldMessageError);
    expect((lines[1] as { err: unknown }).err).toBe(ours);
    expect(lines[2]).toBe('just a message');
  });
});

describe('the failures the activities return to Temporal', () => {
  const request: OwnerRequest = { flow: 'sales', topic: 'orders', partition: 0, owner: { generation: 1, memberId: 'm', taskQueue: 'tq' } };
  const failingWith = (err: unknown): PartitionHost =>
    ({ activity: async (fn: () => Promise<unknown>) => fn(), recover: async () => Promise.reject(err) }) as unknown as PartitionHost;
  function inActivity<T>(fn: () => Promise<T>): Promise<T> {
    const Ctor = Context as unknown as new (...args: unknown[]) => Context;
    const ctx = new Ctor({}, new Promise<never>(() => undefined), new AbortController().signal, () => undefined, undefined, undefined, undefined, {});
    return asyncLocalStorage.run(ctx, fn);
  }
  const failureOf = (err: unknown) => inActivity(() => createFlowActivities(new Map([['sales', failingWith(err)]])).recover(request)).then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e,
  );

  test('a FoldError: typed, non-retryable, nothing of the record in the failure or its causes', async () => {
    const failure = (await failureOf(new FoldError('orders', 0, KEY, '5', foldsOwn()))) as ApplicationFailure;
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect([failure.type, failure.nonRetryable]).toEqual([FailureTypes.persistFailed, true]);
    expect(failure.message).toMatch(/^FoldError: the fold threw on topic "orders" partition 0 offset 5/);
    const all = everything(failure);
    expect(all).not.toContain(VALUE);
    expect(all).not.toContain(KEY);
  });

  test('an error of user code nothing wrapped: its class name only, retryable as before', async () => {
    const failure = (await failureOf(foldsOwn())) as ApplicationFailure;
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect([failure.type, failure.nonRetryable]).toEqual(['TypeError', false]);
    expect(failure.message).toMatch(/^TypeError: \[redacted: logKeys is off\]/);
    expect(everything(failure)).not.toContain(VALUE);
  });

  test('with logKeys, a cancellation, or a Kafka client error: passed as they are', async () => {
    const cancelled = new CancelledFailure('cancelled');
    expect(await failureOf(cancelled)).toBe(cancelled);
    const kafka = new KafkaJSConnectionError('Connection timeout');
    expect(await failureOf(kafka)).toBe(kafka);
    setLogKeys(true);
    const own = foldsOwn();
    expect(await failureOf(own)).toBe(own);
  });
});
