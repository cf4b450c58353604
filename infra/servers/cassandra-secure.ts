import fs from 'node:fs';
import path from 'node:path';
import { auth, Client } from 'cassandra-driver';
import { portOpen } from '../processes';
import { readSecretFile, type SecureMaterial, secureMaterial } from '../secure-material';
import { type InfraSettings, VERSIONS } from '../settings';
import { cassandraServer, nodeYaml, startCassandraNode } from './cassandra';
import { processFor, type Server } from './server';

/**
 * A second, secured Cassandra node (its own data dir and ports; the default node stays open for
 * the other tests): PasswordAuthenticator, client encryption with the local CA's server
 * certificate and a required client certificate (PEM files, Cassandra's PEMBasedSslContextFactory).
 * Once ready it has the login role `kft_client` (password in `$KFT_DATA_DIR/secure/cassandra-password`).
 */
export function cassandraSecureServer(s: InfraSettings): Server {
  const c = s.cassandraSecure;
  const libDir = path.join(s.cacheDir, `cassandra-${VERSIONS.cassandra}`, 'libs');
  const dataDir = path.join(s.dataDir, 'cassandra-secure');
  const configFile = path.join(dataDir, 'cassandra.yaml');
  const address = `${c.host}:${c.port}`;
  const proc = processFor(s, 'cassandra-secure', configFile);
  const client = (m: SecureMaterial, username: string, password: string) =>
    new Client({
      contactPoints: [address],
      localDataCenter: 'datacenter1',
      authProvider: new auth.PlainTextAuthProvider(username, password),
      sslOptions: { ca: [fs.readFileSync(m.caCert)], cert: fs.readFileSync(m.clientCert), key: fs.readFileSync(m.clientKey), rejectUnauthorized: true },
      socketOptions: { connectTimeout: 2000, readTimeout: 5000 },
    });
  return {
    name: 'cassandra-secure',
    version: VERSIONS.cassandra,
    address,
    links: {},
    process: proc,
    // The same jars as the default node.
    install: (log) => cassandraServer(s).install(log),
    start: async () =>
      startCassandraNode({
        proc,
        heapMb: c.heapMb,
        dataDir,
        configFile,
        yaml: secureYaml(s, secureMaterial(s.dataDir)),
        libDir,
        // The default superuser (cassandra/cassandra) at once instead of after 10 s.
        extraJvmOptions: ['-Dcassandra.superuser_setup_delay_ms=0'],
      }),
    probe: async () => {
      if (!(await portOpen(c.host, c.port))) return false;
      const m = secureMaterial(s.dataDir);
      const cl = client(m, 'cassandra', 'cassandra');
      try {
        await cl.connect();
        const rs = await cl.execute('SELECT release_version FROM system.local');
        return rs.rows.length === 1;
      } catch {
        return false;
      } finally {
        await cl.shutdown().catch(() => undefined);
      }
    },
    afterReady: async (log) => {
      const m = secureMaterial(s.dataDir);
      const password = readSecretFile(m.cassandraPasswordFile);
      const cl = client(m, 'cassandra', 'cassandra');
      try {
        await cl.connect();
        const existing = await cl.execute('SELECT role FROM system_auth.roles WHERE role = ?', [m.cassandraUser], { prepare: true });
        // The password is [A-Za-z0-9_-] (base64url), safe inside a CQL string.
        if (existing.rows.length === 0) {
          await cl.execute(`CREATE ROLE IF NOT EXISTS ${m.cassandraUser} WITH PASSWORD = '${password}' AND LOGIN = true AND SUPERUSER = true`);
          log(`created the login role ${m.cassandraUser}`);
        } else {
          await cl.execute(`ALTER ROLE ${m.cassandraUser} WITH PASSWORD = '${password}'`);
        }
      } finally {
        await cl.shutdown().catch(() => undefined);
      }
    },
  };
}

function secureYaml(s: InfraSettings, m: SecureMaterial): string {
  const c = s.cassandraSecure;
  return `${nodeYaml(c, 'kafka-flow-temporal-secure', 'a secured Cassandra node for the connectivity tests')}authenticator: PasswordAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
client_encryption_options:
  enabled: true
  optional: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: ${m.serverKeystore}
  truststore: ${m.truststore}
  require_client_auth: true
`;
}
