/**
 * What a persistence backend tells the rest of the project about itself: one descriptor per backend
 * (persistence/<backend>/descriptor.ts), listed in the registry (persistence/descriptors.ts).
 * `defineFlow`, the worker and `inspect` ask the flow's descriptor instead of testing its backend's name.
 */
import type { z } from 'zod';
import type { WorkerEnv } from '../config/env';
import type { Logger } from '../core/logger';
import type { PersistenceMode } from '../core/persistence-types';
import type { BackendFlow, PersistenceBackend, WorkerContext } from './backends';

/** What every backend's resolved options carry: its name and the engine's persistence mode. */
export interface ResolvedBackendOptions {
  readonly backend: string;
  readonly mode: PersistenceMode;
}

/** What a backend can do besides keeping state; a flow that asks for more is refused by `defineFlow`. */
export interface BackendCapabilities {
  /** Produces dead letters with the key writes that pass them (`onDecodeFailure`/`onFoldFailure: 'dead-letter'`). */
  readonly deadLetters: boolean;
  /** Produces the fold's emitted records with the key writes that pass them (`outputTopics`). */
  readonly outputs: boolean;
  /** Persists a key's pending timers with its snapshot (`onTimer`, `stateTtl`; snapshot modes). */
  readonly keyTimers: boolean;
}

/** A persisted key as `inspect` prints it: one JSON line each. */
export interface InspectedKey {
  topic: string;
  partition: number;
  key: string;
  offset: string;
  state: unknown;
}

/** Which persisted keys `inspect` prints (every key when empty). */
export interface InspectFilter {
  topic?: string;
  partition?: number;
  key?: string;
}

/**
 * One backend: `O` is what a flow gives as `persistence: { backend, … }`, `R` what `resolve` makes
 * of it. The members that need the backend's client (create, inspect, checkAtStart) load it when
 * called, so that `defineFlow` loads no client library.
 */
export interface BackendDescriptor<O extends { backend: string }, R extends ResolvedBackendOptions> {
  /** The `backend` value that selects it. */
  readonly name: O['backend'];
  /** How messages name it ("needs persistence to Kafka or Cassandra"). */
  readonly title: string;
  /** What `defineFlow` validates the options with: an object whose `backend` is the literal `name`. */
  readonly schema: z.core.$ZodTypeDiscriminable;
  readonly capabilities: BackendCapabilities;
  /** The options with their defaults filled in and durations in ms; throws ConfigError for options that cannot go together. */
  resolve(options: O): R;
  /** The backend a worker builds for the flow. */
  create<S, V>(definition: BackendFlow<V, R>, worker: WorkerContext): PersistenceBackend<S, V>;
  /**
   * The flow's persisted keys, read without joining its group (the `inspect` command); `worker()`
   * gives the brokers and their security (read when called). Throws ConfigError when the backend keeps nothing to read.
   */
  inspect(definition: BackendFlow<unknown, R>, filter: InspectFilter, worker: () => WorkerContext): AsyncIterable<InspectedKey>;
  /** A check at worker start, before the group is joined: it throws what must stop the worker, and logs the rest. */
  checkAtStart?(definition: BackendFlow<unknown, R>, env: WorkerEnv, log: Logger): Promise<void>;
  /** The fields the worker's `worker started` line adds for this backend. */
  describe?(env: WorkerEnv): Readonly<Record<string, string>>;
}
