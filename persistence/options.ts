/**
 * A flow's `persistence` option: each backend's schema and resolution (persistence/<backend>/options.ts)
 * composed into the one union `defineFlow` validates and resolves. The engine (`flow/`) sees only
 * the resolved mode.
 */
import { z } from 'zod';
import {
  type CassandraPersistenceOptions,
  cassandraPersistenceSchema,
  type ResolvedCassandraPersistence,
  resolveCassandraPersistence,
} from './cassandra/options';
import { type KafkaPersistenceOptions, kafkaPersistenceSchema, type ResolvedKafkaPersistence, resolveKafkaPersistence } from './kafka/options';
import { type MemoryPersistenceOptions, memoryPersistenceSchema, type ResolvedMemoryPersistence, resolveMemoryPersistence } from './memory/options';

export type { CassandraPersistenceOptions, KafkaPersistenceOptions, MemoryPersistenceOptions };

export type PersistenceOptions = MemoryPersistenceOptions | KafkaPersistenceOptions | CassandraPersistenceOptions;

/** Resolved persistence options: defaults filled in, durations in milliseconds. */
export type ResolvedPersistence = ResolvedMemoryPersistence | ResolvedKafkaPersistence | ResolvedCassandraPersistence;

export const persistenceOptionsSchema = z.discriminatedUnion('backend', [memoryPersistenceSchema, kafkaPersistenceSchema, cassandraPersistenceSchema]);

export function resolvePersistence(p: PersistenceOptions): ResolvedPersistence {
  switch (p.backend) {
    case 'memory':
      return resolveMemoryPersistence(p);
    case 'kafka':
      return resolveKafkaPersistence(p);
    case 'cassandra':
      return resolveCassandraPersistence(p);
  }
}
