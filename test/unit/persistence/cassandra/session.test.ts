// The session's retry of reads a node failed transiently, against a fake client (pure logic: which
// answers are retried, how often, and that the rest fail at once). The real node's side is in
// test/integration/cassandra/outage.test.ts (reads right after a restart).
import { type Client, errors, types } from 'cassandra-driver';
import { CassandraSession, isOverloadError, isTransientReadError } from '../../../../persistence/cassandra/session';

/** A fake driver client: answers `execute` with the next of `answers` (an Error is thrown). */
function fakeClient(answers: Array<Error | types.ResultSet>): { client: Client; calls: () => number } {
  let calls = 0;
  const client = {
    execute: async () => {
      const answer = answers[Math.min(calls++, answers.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  } as unknown as Client;
  return { client, calls: () => calls };
}

const rows = { rows: [{ key: 'k' }] } as unknown as types.ResultSet;
const readFailure = () => new errors.ResponseError(types.responseErrorCodes.readFailure, 'Server failure during read query at consistency LOCAL_QUORUM');
const session = (client: Client) =>
  new CassandraSession(client, { maxConcurrentReads: 4, maxConcurrentWrites: 4, serialConsistency: 'SERIAL', contactPoints: ['127.0.0.1:9042'], readRetryDelaysMs: [1, 1] });

describe('reads a node fails transiently', () => {
  it('are tried again (as often as there are retry delays) and the answer that comes is returned', async () => {
    const fake = fakeClient([readFailure(), new errors.ResponseError(types.responseErrorCodes.readTimeout, 'timeout'), rows]);
    await expect(session(fake.client).read('SELECT', [], 'LOCAL_QUORUM')).resolves.toBe(rows);
    expect(fake.calls()).toBe(3);
  });

  it('fail with the last error when every try failed', async () => {
    const fake = fakeClient([readFailure(), readFailure(), readFailure(), rows]);
    await expect(session(fake.client).read('SELECT', [], 'LOCAL_QUORUM')).rejects.toThrow(/Server failure during read/);
    expect(fake.calls()).toBe(3);
  });

  it('but not when no node answers, or the query itself is wrong: those fail at once', async () => {
    const noHost = new errors.NoHostAvailableError({ '127.0.0.1:9042': new Error('ECONNREFUSED') });
    const invalid = new errors.ResponseError(types.responseErrorCodes.invalid, 'unconfigured table');
    for (const err of [noHost, invalid]) {
      const fake = fakeClient([err, rows]);
      await expect(session(fake.client).read('SELECT', [], 'LOCAL_QUORUM')).rejects.toBe(err);
      expect(fake.calls()).toBe(1);
    }
    expect(isTransientReadError(readFailure())).toBe(true);
    expect(isTransientReadError(new errors.ResponseError(types.responseErrorCodes.overloaded, 'overloaded'))).toBe(true);
    expect(isTransientReadError(new errors.ResponseError(types.responseErrorCodes.writeTimeout, 'write timeout'))).toBe(false);
  });
});

describe('reads that show the node overloaded', () => {
  const timedOut = () => new errors.OperationTimedOutError('The host 127.0.0.1:9042 did not reply before timeout 12000 ms', '127.0.0.1:9042');

  it('(a client-side timeout) are tried again and lower the reads at once, which successes raise again', async () => {
    const fake = fakeClient([timedOut(), rows]);
    const s = session(fake.client);
    expect(s.reads.limit).toBe(4);
    await expect(s.read('SELECT', [], 'LOCAL_QUORUM')).resolves.toBe(rows);
    expect(fake.calls()).toBe(2);
    expect(s.reads.limit).toBe(2);
    await s.read('SELECT', [], 'LOCAL_QUORUM');
    expect(s.reads.limit).toBe(3);
    expect(isTransientReadError(timedOut())).toBe(true);
    expect(isOverloadError(timedOut())).toBe(true);
    expect(isOverloadError(new errors.ResponseError(types.responseErrorCodes.overloaded, 'overloaded'))).toBe(true);
    expect(isOverloadError(readFailure())).toBe(false);
    // A preparation that timed out on every host tried comes as "no host available".
    expect(isOverloadError(new errors.NoHostAvailableError({ '127.0.0.1:9042': timedOut() }))).toBe(true);
    expect(isOverloadError(new errors.NoHostAvailableError({ '127.0.0.1:9042': timedOut(), '127.0.0.2:9042': new Error('ECONNREFUSED') }))).toBe(false);
    expect(isOverloadError(new errors.NoHostAvailableError({}))).toBe(false);
  });

  it('a failure that is no overload leaves the reads at once as they were', async () => {
    const fake = fakeClient([readFailure(), rows]);
    const s = session(fake.client);
    await s.read('SELECT', [], 'LOCAL_QUORUM');
    expect(s.reads.limit).toBe(4);
  });
});
