/**
 * The certificates and secrets of the local secured servers (`infra`): a CA made with openssl, a
 * server certificate for 127.0.0.1/localhost signed by it (Kafka's SASL_SSL and SSL listeners, the
 * secured Cassandra node, the Temporal TLS endpoint), a client certificate for mTLS, and random
 * passwords and an API key. Written once into `$KFT_DATA_DIR/secure/` (git-ignored, mode 0600
 * for keys and secrets) and reused; never committed. Tests and users read them from there
 * (`secure.env` lists them as the client variables).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { KafkaFlowError } from '../config/errors';

export interface SecureMaterial {
  readonly dir: string;
  readonly caCert: string;
  /** Server certificate (PEM) and its PKCS#8 key; SAN IP:127.0.0.1, DNS:localhost. */
  readonly serverCert: string;
  readonly serverKey: string;
  /** The server's key followed by its certificate chain, in one PEM file (Kafka and Cassandra PEM keystores). */
  readonly serverKeystore: string;
  /** The CA in a PEM truststore file. */
  readonly truststore: string;
  /** Client certificate (CN=kafka-flow-temporal-client) and its key, for mTLS. */
  readonly clientCert: string;
  readonly clientKey: string;
  /** A client certificate from a CA nobody trusts: for the "refused certificate" tests. */
  readonly untrustedClientCert: string;
  readonly untrustedClientKey: string;
  /** Files holding one secret each (mode 0600). */
  readonly kafkaUser: string;
  readonly kafkaPasswordFile: string;
  readonly cassandraUser: string;
  readonly cassandraPasswordFile: string;
  readonly temporalApiKeyFile: string;
}

export const KAFKA_SASL_USER = 'kft_client';
export const CASSANDRA_USER = 'kft_client';

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: 'pipe' });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer };
    if (e.code === 'ENOENT') throw new KafkaFlowError('OPENSSL_MISSING', 'openssl is needed to make the secured servers\' certificates: apt-get install -y openssl');
    throw new KafkaFlowError('OPENSSL_FAILED', `openssl ${args[0]} failed: ${(e.stderr?.toString() ?? String(err)).trim().split('\n').slice(-3).join(' ')}`, { cause: err });
  }
}

const writeSecret = (file: string, value: string) => fs.writeFileSync(file, `${value}\n`, { mode: 0o600 });

/** Makes (first time) and returns the material under `<dataDir>/secure`. */
export function secureMaterial(dataDir: string): SecureMaterial {
  const dir = path.join(dataDir, 'secure');
  const f = (name: string) => path.join(dir, name);
  const m: SecureMaterial = {
    dir,
    caCert: f('ca.pem'),
    serverCert: f('server.pem'),
    serverKey: f('server-key.pem'),
    serverKeystore: f('server-keystore.pem'),
    truststore: f('truststore.pem'),
    clientCert: f('client.pem'),
    clientKey: f('client-key.pem'),
    untrustedClientCert: f('untrusted-client.pem'),
    untrustedClientKey: f('untrusted-client-key.pem'),
    kafkaUser: KAFKA_SASL_USER,
    kafkaPasswordFile: f('kafka-password'),
    cassandraUser: CASSANDRA_USER,
    cassandraPasswordFile: f('cassandra-password'),
    temporalApiKeyFile: f('temporal-api-key'),
  };
  const done = f('.complete');
  if (fs.existsSync(done)) return m;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const days = '3650';
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', days, '-subj', '/CN=kafka-flow-temporal local test CA'], dir);
  const sign = (name: string, subject: string, ext: string, caCert = 'ca.pem', caKey = 'ca-key.pem') => {
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', subject], dir);
    fs.writeFileSync(f(`${name}.ext`), ext);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', caCert, '-CAkey', caKey, '-CAcreateserial', '-out', `${name}.pem`, '-days', days, '-extfile', `${name}.ext`], dir);
    fs.rmSync(f(`${name}.csr`));
    fs.rmSync(f(`${name}.ext`));
  };
  sign('server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  sign('client', '/CN=kafka-flow-temporal-client', 'extendedKeyUsage=clientAuth\n');
  // A client certificate from another CA: well formed, trusted by nobody.
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'untrusted-ca-key.pem', '-out', 'untrusted-ca.pem', '-days', days, '-subj', '/CN=an untrusted CA'], dir);
  sign('untrusted-client', '/CN=untrusted-client', 'extendedKeyUsage=clientAuth\n', 'untrusted-ca.pem', 'untrusted-ca-key.pem');
  fs.writeFileSync(m.serverKeystore, fs.readFileSync(m.serverKey, 'utf8') + fs.readFileSync(m.serverCert, 'utf8'), { mode: 0o600 });
  fs.copyFileSync(m.caCert, m.truststore);
  writeSecret(m.kafkaPasswordFile, randomBytes(18).toString('base64url'));
  writeSecret(m.cassandraPasswordFile, randomBytes(18).toString('base64url'));
  writeSecret(m.temporalApiKeyFile, `kft-${randomBytes(24).toString('base64url')}`);
  for (const name of fs.readdirSync(dir)) if (name.endsWith('-key.pem')) fs.chmodSync(f(name), 0o600);
  fs.writeFileSync(done, '');
  return m;
}

/** A secret file's value (one trailing newline dropped), for the servers' own configuration. */
export const readSecretFile = (file: string): string => fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
