/** The `cassandra` backend: kafka-flow's tables, LWT-fenced snapshot writes, offsets committed by the consumer (docs/cassandra.md). */
import type { BackendDescriptor } from '../descriptor';
import type * as Factory from './factory';
import { type CassandraPersistenceOptions, cassandraPersistenceSchema, type ResolvedCassandraPersistence, resolveCassandraPersistence } from './options';

// The factory is required when used: it loads the Cassandra driver, which takes a while to load
// and which a worker of another backend's flow never needs.
export const cassandraDescriptor: BackendDescriptor<CassandraPersistenceOptions, ResolvedCassandraPersistence> = {
  name: 'cassandra',
  title: 'Cassandra',
  schema: cassandraPersistenceSchema,
  capabilities: { deadLetters: true, outputs: true },
  resolve: resolveCassandraPersistence,
  create: (definition, worker) => (require('./factory') as typeof Factory).cassandraBackend(definition, worker),
};
