/**
 * A flow's `persistence` option: every registered backend's schema (persistence/descriptors.ts)
 * composed into the one union `defineFlow` validates, and the resolution by the backend it names.
 * The engine (`flow/`) sees only the resolved mode.
 */
import { z } from 'zod';
import type { CassandraPersistenceOptions } from './cassandra/options';
import { backendDescriptors, descriptorOf, type PersistenceOptions, type ResolvedPersistence } from './descriptors';
import type { KafkaPersistenceOptions } from './kafka/options';
import type { MemoryPersistenceOptions } from './memory/options';

export type { CassandraPersistenceOptions, KafkaPersistenceOptions, MemoryPersistenceOptions, PersistenceOptions, ResolvedPersistence };

const [first, ...rest] = Object.values(backendDescriptors).map((d) => d.schema);

/** `persistence: { backend, … }` as any registered backend takes it, told apart by `backend`. */
export const persistenceOptionsSchema = z.discriminatedUnion('backend', [first!, ...rest]);

export function resolvePersistence(p: PersistenceOptions): ResolvedPersistence {
  return descriptorOf(p.backend).resolve(p);
}
