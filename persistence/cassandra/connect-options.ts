/**
 * CASSANDRA_USERNAME / CASSANDRA_PASSWORD, CASSANDRA_TLS_* and CASSANDRA_LOCAL_DATACENTER (parsed in
 * config/security) as cassandra-driver client options, and the worker's start check of them.
 */
import { auth, Client, type ClientOptions } from 'cassandra-driver';
import type { CassandraSecurity } from '../../config/security';
import { cassandraAuthFailure, innerText } from './auth-errors';

export { CassandraAuthenticationError, cassandraAuthFailure } from './auth-errors';

/** `authProvider` and `sslOptions` for `security` (nothing for plaintext without credentials). */
export function cassandraConnectOptions(security: CassandraSecurity | undefined): Pick<ClientOptions, 'authProvider' | 'sslOptions'> {
  if (!security) return {};
  const c = security.credentials;
  const t = security.tls;
  return {
    ...(c ? { authProvider: new auth.PlainTextAuthProvider(c.username, c.password.reveal()) } : {}),
    ...(t
      ? {
          sslOptions: {
            rejectUnauthorized: true,
            ...(t.ca ? { ca: [t.ca.pem] } : {}),
            ...(t.cert && t.key ? { cert: t.cert.pem, key: t.key.pem } : {}),
            ...(t.serverName ? { servername: t.serverName } : {}),
          },
        }
      : {}),
  };
}

/**
 * The worker's start check of a Cassandra-backed flow: one connection with the configured
 * credentials and TLS. Refused credentials or a failed handshake throw CassandraAuthenticationError
 * (the worker exits with one line); an unreachable Cassandra does not — the backend connects on the
 * partitions' next retry, as it always has (a worker may start before Cassandra).
 */
export async function checkCassandraLogin(
  contactPoints: readonly string[],
  localDataCenter: string,
  security: CassandraSecurity | undefined,
): Promise<{ ok: true } | { ok: false; why: string }> {
  const client = new Client({
    contactPoints: [...contactPoints],
    localDataCenter,
    ...cassandraConnectOptions(security),
    socketOptions: { connectTimeout: 5000, readTimeout: 10000 },
  });
  try {
    await client.connect();
    return { ok: true };
  } catch (err) {
    const auth = cassandraAuthFailure(contactPoints, security, err);
    if (auth) throw auth;
    return { ok: false, why: innerText(err) };
  } finally {
    await client.shutdown().catch(() => undefined);
  }
}
