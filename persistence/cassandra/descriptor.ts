/** The `cassandra` backend: kafka-flow's tables, LWT-fenced snapshot writes, offsets committed by the consumer (docs/cassandra.md). */
import type { BackendDescriptor } from '../descriptor';
import type * as Factory from './factory';
import type * as Inspect from './inspect';
import { type CassandraPersistenceOptions, cassandraPersistenceSchema, type ResolvedCassandraPersistence, resolveCassandraPersistence } from './options';

// The factory and the reader are required when used: they load the Cassandra
// driver, which takes a while to load and which a worker of another backend's flow never needs.
export const cassandraDescriptor: BackendDescriptor<CassandraPersistenceOptions, ResolvedCassandraPersistence> = {
  name: 'cassandra',
  title: 'Cassandra',
  schema: cassandraPersistenceSchema,
  capabilities: { deadLetters: true, outputs: true },
  resolve: resolveCassandraPersistence,
  create: (definition, worker) => (require('./factory') as typeof Factory).cassandraBackend(definition, worker),
  inspect: (definition, filter, worker) => (require('./inspect') as typeof Inspect).inspectCassandra(definition, filter, worker()),
};
