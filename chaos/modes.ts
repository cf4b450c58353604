// The persistence modes a chaos run drives, each with its own topic, workers and producer.
import type { ChaosBackend, chaosFlow } from './flow';
import type { LoadProducer } from './load-producer';
import type { Server } from './outages';
import type { WorkerPool } from './workers';

export interface ModeSpec {
  id: string;
  backend: ChaosBackend;
  local: boolean;
  /**
   * The workers' bounded state cache (KFT_STATE_CACHE_MAX_KEYS) as a share of the run's keys: most
   * keys live in the local store and are read back on demand (for a record, or when a timer of
   * theirs comes due: the store's due-time index).
   */
  cacheShare?: number;
  /** Standby copies of each partition on other workers (KFT_STANDBY_REPLICAS). */
  standbyReplicas?: number;
}
export const MODE_SPECS: Record<string, ModeSpec> = {
  kafka: { id: 'kafka', backend: 'kafka', local: false },
  'kafka-local': { id: 'kafka-local', backend: 'kafka', local: true },
  // State beyond memory: a tenth of the keys in memory, the rest in the local stores, and a
  // standby copy of every partition on another worker.
  'kafka-cache': { id: 'kafka-cache', backend: 'kafka', local: true, cacheShare: 0.1, standbyReplicas: 1 },
  cassandra: { id: 'cassandra', backend: 'cassandra', local: false },
  // Cassandra with local state (written ahead of Cassandra, trusted by the commit's lineage) and a
  // tenth of the keys in memory, the rest read from the local stores.
  'cassandra-local': { id: 'cassandra-local', backend: 'cassandra', local: true, cacheShare: 0.1 },
  // Caching mode (unfenced) with local state and a tenth of the keys in memory: exact only under
  // faults that leave no stale owner writing (kill -9, restarts, broker and Temporal restarts), so
  // run it with --faults-only (a paused owner's late flush lands here by design).
  'kafka-caching-local': { id: 'kafka-caching-local', backend: 'kafka-caching', local: true, cacheShare: 0.1 },
};

/**
 * What a mode's partitions need to make progress: the servers (commits go through Temporal's
 * timers), and owners the group knows to be alive (`owner:<mode>`).
 */
export function serversNeeded(spec: ModeSpec): Server[] {
  const servers: Server[] = spec.backend === 'cassandra' ? ['kafka', 'temporal', 'cassandra'] : ['kafka', 'temporal'];
  return [...servers, ownerOf(spec)];
}

export const ownerOf = (spec: ModeSpec): Server => `owner:${spec.id}`;

export interface Mode {
  spec: ModeSpec;
  index: number;
  name: string;
  topic: string;
  pool: WorkerPool;
  producer: LoadProducer;
  definition: ReturnType<typeof chaosFlow>;
}
