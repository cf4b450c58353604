/**
 * The registry of persistence backends: each backend's descriptor under the name a flow selects it
 * by (`persistence: { backend }`). A new backend is a folder with its descriptor and one line here.
 */
import { ConfigError } from '../config/errors';
import { cassandraDescriptor } from './cassandra/descriptor';
import type { BackendCapabilities, BackendDescriptor } from './descriptor';
import { kafkaDescriptor } from './kafka/descriptor';
import { memoryDescriptor } from './memory/descriptor';

/** Every backend, in the order messages list them. */
export const backendDescriptors = {
  memory: memoryDescriptor,
  kafka: kafkaDescriptor,
  cassandra: cassandraDescriptor,
} as const;

type Registered = (typeof backendDescriptors)[keyof typeof backendDescriptors];
type OptionsOf<D> = D extends BackendDescriptor<infer O, infer _R> ? O : never;
type ResolvedOf<D> = D extends BackendDescriptor<infer _O, infer R> ? R : never;

/** What a flow may give as `persistence`: any registered backend's options. */
export type PersistenceOptions = OptionsOf<Registered>;

/** Resolved persistence options: defaults filled in, durations in milliseconds. */
export type ResolvedPersistence = ResolvedOf<Registered>;

/** A descriptor as the callers that do not know the backend see it. */
export type AnyBackendDescriptor = BackendDescriptor<PersistenceOptions, ResolvedPersistence>;

/** The named backend's descriptor, or undefined if there is none. */
export function findDescriptor(backend: string): AnyBackendDescriptor | undefined {
  return Object.hasOwn(backendDescriptors, backend) ? backendDescriptors[backend as keyof typeof backendDescriptors] : undefined;
}

/** The named backend's descriptor; ConfigError if no backend has that name. */
export function descriptorOf(backend: string): AnyBackendDescriptor {
  const descriptor = findDescriptor(backend);
  if (!descriptor) throw new ConfigError(`unknown persistence backend "${backend}" (known: ${Object.keys(backendDescriptors).join(', ')})`);
  return descriptor;
}

/**
 * Why a flow persisting with `persistence` cannot have `capability`: "backend 'memory'" (its backend
 * lacks it) or "mode 'none'" (it persists nothing, so nothing carries it); undefined when it can.
 */
export function lackOf(persistence: ResolvedPersistence, capability: keyof BackendCapabilities): string | undefined {
  if (!descriptorOf(persistence.backend).capabilities[capability]) return `backend '${persistence.backend}'`;
  if (persistence.mode === 'none') return "mode 'none'";
  return undefined;
}

/** The backends that have `capability`, as a message lists them: "Kafka or Cassandra". */
export function backendsWith(capability: keyof BackendCapabilities): string {
  const titles = Object.values(backendDescriptors)
    .filter((d) => d.capabilities[capability])
    .map((d) => d.title);
  const last = titles.pop() ?? '';
  return titles.length > 0 ? `${titles.join(', ')} or ${last}` : last;
}
