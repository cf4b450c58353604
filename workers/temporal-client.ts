import { Client, Connection } from '@temporalio/client';
import { type Env, formatHostPort, readEnv } from '../config/env';
import { TemporalUnreachableError } from './errors';

export interface TemporalClientConnection {
  readonly address: string;
  readonly namespace: string;
  readonly connection: Connection;
  readonly client: Client;
}

/**
 * A client connection to TEMPORAL_ADDRESS that has answered once (so an unreachable server is a
 * TemporalUnreachableError now, not a hang later). Client SDK only: `status` answers without
 * loading the worker SDK.
 */
export async function connectTemporalClient(env: Env = readEnv()): Promise<TemporalClientConnection> {
  const address = formatHostPort(env.temporalAddress);
  const namespace = env.temporalNamespace;
  let connection: Connection;
  try {
    connection = await Connection.connect({ address, connectTimeout: 5000 });
    await connection.workflowService.getSystemInfo({});
  } catch (err) {
    throw new TemporalUnreachableError(address, err);
  }
  return { address, namespace, connection, client: new Client({ connection, namespace }) };
}
