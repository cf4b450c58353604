// The persistence modes a chaos run drives, each with its own topic, workers and producer.
import type { ChaosBackend, chaosFlow } from './flow';
import type { LoadProducer } from './load-producer';
import type { Server } from './outages';
import type { WorkerPool } from './workers';

export interface ModeSpec {
  id: string;
  backend: ChaosBackend;
  local: boolean;
}
export const MODE_SPECS: Record<string, ModeSpec> = {
  kafka: { id: 'kafka', backend: 'kafka', local: false },
  'kafka-local': { id: 'kafka-local', backend: 'kafka', local: true },
  cassandra: { id: 'cassandra', backend: 'cassandra', local: false },
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
