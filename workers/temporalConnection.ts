import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { formatHostPort, readEnv } from '../config/env';
import { TemporalUnreachableError } from './errors';

export interface TemporalConnections {
  address: string;
  namespace: string;
  client: Client;
  connect(): Promise<NativeConnection>;
  close(): Promise<void>;
}

export async function connectTemporal(env = readEnv()): Promise<TemporalConnections> {
  const address = formatHostPort(env.temporalAddress);
  const namespace = env.temporalNamespace;
  let connection: Connection;
  try {
    connection = await Connection.connect({ address, connectTimeout: 5000 });
    await connection.workflowService.getSystemInfo({});
  } catch (err) {
    throw new TemporalUnreachableError(address, err);
  }
  const natives: NativeConnection[] = [];
  return {
    address,
    namespace,
    client: new Client({ connection, namespace }),
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
