/** The `memory` backend (for tests and trying things out): its state lives in the worker process only. */
import { ConfigError } from '../../config/errors';
import type { BackendDescriptor } from '../descriptor';
import { memoryBackend } from './factory';
import { type MemoryPersistenceOptions, memoryPersistenceSchema, type ResolvedMemoryPersistence, resolveMemoryPersistence } from './options';

export const memoryDescriptor: BackendDescriptor<MemoryPersistenceOptions, ResolvedMemoryPersistence> = {
  name: 'memory',
  title: 'memory',
  schema: memoryPersistenceSchema,
  // It produces nothing to Kafka: no key write of its own could carry a dead letter or an output.
  capabilities: { deadLetters: false, outputs: false, keyTimers: true },
  resolve: resolveMemoryPersistence,
  create: (definition) => memoryBackend(definition),
  inspect: (definition) => {
    throw new ConfigError(`flow "${definition.name}" uses the memory backend: its state lives inside each worker process and cannot be inspected`);
  },
};
