import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { portOpen, startDetached } from '../processes';
import { secureMaterial } from '../secure-material';
import type { InfraSettings } from '../settings';
import { processFor, type Server } from './server';

/**
 * The TLS endpoint in front of the local Temporal dev server (infra/temporal-tls-proxy.ts): mTLS
 * with the local CA, or an API key (`$KFT_DATA_DIR/secure/temporal-api-key`). Needs `temporal` up.
 */
export function temporalTlsServer(s: InfraSettings): Server {
  const t = s.temporalTls;
  const dir = path.join(s.dataDir, 'temporal-tls');
  const configFile = path.join(dir, 'temporal-tls.json');
  const address = `${t.host}:${t.port}`;
  const proc = processFor(s, 'temporal-tls', configFile);
  return {
    name: 'temporal-tls',
    version: 'TLS endpoint',
    address,
    links: { upstream: `${s.temporal.host}:${s.temporal.port}` },
    process: proc,
    install: async () => false,
    start: async () => {
      const m = secureMaterial(s.dataDir);
      fs.mkdirSync(dir, { recursive: true });
      const config = {
        host: t.host,
        port: t.port,
        upstream: `${s.temporal.host}:${s.temporal.port}`,
        key: m.serverKey,
        cert: m.serverCert,
        ca: m.caCert,
        apiKeyFile: m.temporalApiKeyFile,
      };
      fs.writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
      startDetached(proc, process.execPath, [path.join(s.root, 'bin', 'run-ts.js'), path.join(s.root, 'infra', 'temporal-tls-proxy.ts'), configFile]);
    },
    probe: async () => {
      if (!(await portOpen(t.host, t.port))) return false;
      const m = secureMaterial(s.dataDir);
      try {
        const connection = await Connection.connect({
          address,
          connectTimeout: 2000,
          tls: { serverNameOverride: 'localhost', serverRootCACertificate: fs.readFileSync(m.caCert), clientCertPair: { crt: fs.readFileSync(m.clientCert), key: fs.readFileSync(m.clientKey) } },
        });
        try {
          await connection.workflowService.getSystemInfo({});
          return true;
        } finally {
          await connection.close();
        }
      } catch {
        return false;
      }
    },
  };
}
