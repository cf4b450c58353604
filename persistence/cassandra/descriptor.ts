/** The `cassandra` backend: kafka-flow's tables, LWT-fenced snapshot writes, offsets committed by the consumer (docs/cassandra.md). */
import { describeCassandraSecurity } from '../../config/security';
import type { BackendDescriptor } from '../descriptor';
import type * as Factory from './factory';
import type * as Inspect from './inspect';
import { type CassandraPersistenceOptions, cassandraPersistenceSchema, type ResolvedCassandraPersistence, resolveCassandraPersistence } from './options';
import type * as StartCheck from './start-check';

// The factory, the reader and the start-up check are required when used: they load the Cassandra
// driver, which takes a while to load and which a worker of another backend's flow never needs.
export const cassandraDescriptor: BackendDescriptor<CassandraPersistenceOptions, ResolvedCassandraPersistence> = {
  name: 'cassandra',
  title: 'Cassandra',
  schema: cassandraPersistenceSchema,
  capabilities: { deadLetters: true, outputs: true, keyTimers: true },
  resolve: resolveCassandraPersistence,
  create: (definition, worker) => (require('./factory') as typeof Factory).cassandraBackend(definition, worker),
  inspect: (definition, filter, worker) => (require('./inspect') as typeof Inspect).inspectCassandra(definition, filter, worker()),
  checkAtStart: (definition, env, log) => (require('./start-check') as typeof StartCheck).checkCassandraAtStart(definition, env, log),
  describe: (env) => ({ cassandraSecurity: describeCassandraSecurity(env.security.cassandra) }),
};
