import { formatHostPort, type WorkerEnv } from '../../config/env';
import type { Logger } from '../../core/logger';
import type { BackendFlow } from '../backends';
import { checkCassandraLogin } from './connect-options';
import type { ResolvedCassandraPersistence } from './options';

/**
 * Refused Cassandra credentials or TLS stop the worker at start with one line (retrying cannot
 * help); an unreachable Cassandra does not: the partitions connect on their next retry.
 */
export async function checkCassandraAtStart(definition: BackendFlow<unknown, ResolvedCassandraPersistence>, env: WorkerEnv, log: Logger): Promise<void> {
  const o = definition.persistence.options;
  const contactPoints = o.contactPoints ?? env.cassandraContactPoints.map(formatHostPort);
  const dc = o.localDataCenter ?? env.security.cassandra.localDataCenter ?? 'datacenter1';
  const outcome = await checkCassandraLogin(contactPoints, dc, env.security.cassandra);
  if (!outcome.ok) {
    log.warn({ contactPoints, why: outcome.why }, 'Cassandra does not answer yet (or closed a plaintext connection: CASSANDRA_TLS?): the partitions connect when they are assigned, and retry');
  }
}
