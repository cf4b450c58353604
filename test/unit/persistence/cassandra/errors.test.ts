// What a failed Cassandra statement's error tells the operator (persistence/cassandra/errors.ts),
// from the driver's own error classes: no node answering is "is it running?", every host timing
// out (as a statement's preparation reports it) is an overloaded node, not a down one.
import { errors } from 'cassandra-driver';
import { CassandraPersistenceError } from '../../../../persistence/cassandra';

const where = { operation: 'key listing', table: 'ks.keys', topic: 'orders', partition: 0, contactPoints: ['127.0.0.1:9042'] };
const timedOut = () => new errors.OperationTimedOutError('The host 127.0.0.1:9042 did not reply before timeout 12000 ms', '127.0.0.1:9042');

test('no node answering: is it running and reachable?', () => {
  const err = new CassandraPersistenceError(where, new errors.NoHostAvailableError({ '127.0.0.1:9042': new Error('connect ECONNREFUSED') }));
  expect(err.message).toMatch(/— no Cassandra node answered at 127\.0\.0\.1:9042: is it running and reachable\?\.$/);
});

test('every host tried timed out (a preparation says so as "no host available"): overloaded or unreachable, as a read timeout', () => {
  const viaPrepare = new CassandraPersistenceError(where, new errors.NoHostAvailableError({ '127.0.0.1:9042': timedOut() }));
  const direct = new CassandraPersistenceError(where, timedOut());
  for (const err of [viaPrepare, direct]) expect(err.message).toMatch(/— the request timed out: Cassandra is overloaded or unreachable\.$/);
  const write = new CassandraPersistenceError({ ...where, writing: true }, new errors.NoHostAvailableError({ '127.0.0.1:9042': timedOut() }));
  expect(write.message).toContain('the request timed out, so whether these writes landed is unknown');
});
