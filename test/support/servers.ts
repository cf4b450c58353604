import { randomUUID } from 'node:crypto';
import { formatHostPort, readEnv } from '../../config/env';

/** Addresses of the real servers the integration tests talk to (same variables as the CLI). */
export const env = readEnv();
export const kafkaBrokers = env.kafkaBrokers.map(formatHostPort);
export const temporalAddress = formatHostPort(env.temporalAddress);
export const temporalNamespace = env.temporalNamespace;
export const cassandraContactPoints = env.cassandraContactPoints.map(formatHostPort);

/** A name no other test (or earlier run) uses: topics, groups, task queues, keyspaces. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;
