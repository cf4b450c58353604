import type { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { readEnv } from '../../config/env';
import type { TemporalSecurity } from '../../config/security';
import { TemporalUnreachableError } from './errors';
import { connectTemporalClient } from './temporal-client';
import { temporalAuthFailure, temporalConnectOptions } from './temporal-tls';

export interface TemporalConnections {
  address: string;
  namespace: string;
  client: Client;
  connect(): Promise<NativeConnection>;
  close(): Promise<void>;
}

export async function connectTemporal(env = readEnv(), security?: TemporalSecurity): Promise<TemporalConnections> {
  const { address, namespace, client, security: used, close: closeClient } = await connectTemporalClient(env, security);
  const natives: NativeConnection[] = [];
  return {
    address,
    namespace,
    client,
    async connect() {
      try {
        const c = await NativeConnection.connect({ address, ...temporalConnectOptions(used) });
        natives.push(c);
        return c;
      } catch (err) {
        throw temporalAuthFailure(address, used, err) ?? new TemporalUnreachableError(address, err);
      }
    },
    async close() {
      await Promise.all(natives.map((c) => c.close().catch(() => undefined)));
      await closeClient();
    },
  };
}
