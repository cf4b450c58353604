// The persistence modes a chaos run drives, each with its own topic, workers and producer.
import type { ChaosBackend, chaosFlow } from '../test/fixtures/chaosFlow';
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

/** The servers a mode's partitions need to make progress (commits go through Temporal's timers). */
export function serversNeeded(spec: ModeSpec): Server[] {
  return spec.backend === 'cassandra' ? ['kafka', 'temporal', 'cassandra'] : ['kafka', 'temporal'];
}

export interface Mode {
  spec: ModeSpec;
  index: number;
  name: string;
  topic: string;
  pool: WorkerPool;
  producer: LoadProducer;
  definition: ReturnType<typeof chaosFlow>;
}
