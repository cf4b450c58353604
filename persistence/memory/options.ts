/** The memory backend's options: the zod schema `defineFlow` validates `persistence: { backend: 'memory', ... }` with, and their resolution. */
import { z } from 'zod';
import { PERSISTENCE_MODES, type PersistenceMode } from '../../core/persistence-types';

export interface MemoryPersistenceOptions {
  backend: 'memory';
  /** Default 'snapshots'; 'none' makes the flow transient (nothing persisted). */
  mode?: PersistenceMode;
}

export interface ResolvedMemoryPersistence {
  backend: 'memory';
  mode: PersistenceMode;
}

export const memoryPersistenceSchema = z.strictObject({ backend: z.literal('memory'), mode: z.enum(PERSISTENCE_MODES).optional() });

export function resolveMemoryPersistence(p: MemoryPersistenceOptions): ResolvedMemoryPersistence {
  return { backend: 'memory', mode: p.mode ?? 'snapshots' };
}
