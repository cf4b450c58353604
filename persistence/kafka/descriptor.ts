/** The `kafka` backend: snapshots in compacted topics, written in transactions with the input offsets (docs/kafka-persistence.md). */
import type { BackendDescriptor } from '../descriptor';
import type * as Factory from './factory';
import type * as Inspect from './inspect';
import { type KafkaPersistenceOptions, kafkaPersistenceSchema, type ResolvedKafkaPersistence, resolveKafkaPersistence } from './options';

// The factory and the reader are required when used: they load kafkajs, which `defineFlow` does not need.
export const kafkaDescriptor: BackendDescriptor<KafkaPersistenceOptions, ResolvedKafkaPersistence> = {
  name: 'kafka',
  title: 'Kafka',
  schema: kafkaPersistenceSchema,
  capabilities: { deadLetters: true, outputs: true, keyTimers: true },
  resolve: resolveKafkaPersistence,
  create: (definition, worker) => (require('./factory') as typeof Factory).kafkaBackend(definition, worker),
  inspect: (definition, filter, worker) => (require('./inspect') as typeof Inspect).inspectKafka(definition, filter, worker()),
};
