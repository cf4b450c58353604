import { Client, Connection } from '@temporalio/client';
import { type Env, formatHostPort, readEnv } from '../config/env';
import { readTemporalSecurity, type TemporalSecurity } from '../config/security';
import { TemporalUnreachableError } from './errors';
import { temporalAuthFailure, temporalConnectOptions, temporalSessionFailure } from './temporal-tls';

export interface TemporalClientConnection {
  readonly address: string;
  readonly namespace: string;
  readonly connection: Connection;
  readonly client: Client;
  /** TEMPORAL_TLS_* / TEMPORAL_API_KEY, for the worker's native connections. */
  readonly security: TemporalSecurity;
}

/**
 * A client connection to TEMPORAL_ADDRESS that has answered once (so an unreachable server is a
 * TemporalUnreachableError now, not a hang later). Client SDK only: `status` answers without
 * loading the worker SDK.
 */
export async function connectTemporalClient(env: Env = readEnv(), security: TemporalSecurity = readTemporalSecurity()): Promise<TemporalClientConnection> {
  const address = formatHostPort(env.temporalAddress);
  const namespace = env.temporalNamespace;
  let connection: Connection;
  try {
    connection = await Connection.connect({ address, connectTimeout: 5000, ...temporalConnectOptions(security) });
    await connection.workflowService.getSystemInfo({});
  } catch (err) {
    throw temporalAuthFailure(address, security, err) ?? (await temporalSessionFailure(env.temporalAddress, address, security, err)) ?? new TemporalUnreachableError(address, err);
  }
  return { address, namespace, connection, client: new Client({ connection, namespace }), security };
}
