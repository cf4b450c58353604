import type { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { readEnv } from '../config/env';
import { TemporalUnreachableError } from './errors';
import { connectTemporalClient } from './temporal-client';

export interface TemporalConnections {
  address: string;
  namespace: string;
  client: Client;
  connect(): Promise<NativeConnection>;
  close(): Promise<void>;
}

export async function connectTemporal(env = readEnv()): Promise<TemporalConnections> {
  const { address, namespace, connection, client } = await connectTemporalClient(env);
  const natives: NativeConnection[] = [];
  return {
    address,
    namespace,
    client,
    async connect() {
      try {
        const c = await NativeConnection.connect({ address });
        natives.push(c);
        return c;
      } catch (err) {
        throw new TemporalUnreachableError(address, err);
      }
    },
    async close() {
      await Promise.all(natives.map((c) => c.close().catch(() => undefined)));
      await connection.close();
    },
  };
}
