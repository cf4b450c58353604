import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { readWorkerEnv } from '../../../config/env';
import { ConfigError, formatFatal } from '../../../config/errors';
import {
  describeKafkaSecurity,
  readCassandraSecurity,
  readKafkaSecurity,
  readSecurity,
  readTemporalSecurity,
  Secret,
} from '../../../config/security';
import { kafkaConnectionSecurity } from '../../../kafka/client-security';
import { cassandraConnectOptions } from '../../../persistence/cassandra/connect-options';
import { temporalConnectOptions } from '../../../workers/connect/temporal-tls';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-security-'));
const file = (name: string, content: string) => {
  const p = path.join(dir, name);
  fs.writeFileSync(p, content);
  return p;
};
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const ca = file('ca.pem', PEM);
const cert = file('client.pem', PEM);
const key = file('client-key.pem', '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n');
const passwordFile = file('password', 's3cret-from-file\n');
const provider = file('provider.js', "module.exports = async () => ({ value: 'token-1' });\n");
const badProvider = file('bad-provider.js', 'module.exports = { nothing: 1 };\n');

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect(formatFatal(err)).not.toContain('\n');
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('connection security from the environment', () => {
  test('nothing set: plaintext everywhere, no credentials', () => {
    expect(readSecurity({})).toEqual({
      kafka: { ssl: undefined },
      temporal: { tls: undefined, apiKey: undefined },
      cassandra: { localDataCenter: undefined, credentials: undefined, tls: undefined },
    });
    expect(kafkaConnectionSecurity(readKafkaSecurity({}))).toEqual({});
    expect(temporalConnectOptions(readTemporalSecurity({}))).toEqual({});
    expect(cassandraConnectOptions(readCassandraSecurity({}))).toEqual({});
  });

  test('Kafka SASL_SSL with SCRAM, the password from a file, a CA and a client certificate (mTLS)', () => {
    const s = readKafkaSecurity({
      KAFKA_SSL_CA_PATH: ca,
      KAFKA_SSL_CERT_PATH: cert,
      KAFKA_SSL_KEY_PATH: key,
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'alice',
      KAFKA_SASL_PASSWORD_FILE: passwordFile,
    });
    expect(describeKafkaSecurity(s)).toBe('SASL_SSL scram-sha-512 as alice with a client certificate');
    const o = kafkaConnectionSecurity(s);
    expect(o.sasl).toEqual({ mechanism: 'scram-sha-512', username: 'alice', password: 's3cret-from-file' });
    expect(o.ssl).toEqual({ ca: [fs.readFileSync(ca)], cert: fs.readFileSync(cert), key: fs.readFileSync(key) });
  });

  test('KAFKA_SSL=1 alone is TLS with the system CAs; SASL PLAIN over plaintext, allowed explicitly, is SASL_PLAINTEXT', () => {
    expect(kafkaConnectionSecurity(readKafkaSecurity({ KAFKA_SSL: '1' }))).toEqual({ ssl: true });
    const plain = readKafkaSecurity({ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p', KAFKA_ALLOW_PLAINTEXT_CREDENTIALS: '1' });
    expect(describeKafkaSecurity(plain)).toBe('SASL_PLAINTEXT plain as u');
  });

  describe('credentials over plaintext are refused unless allowed explicitly', () => {
    const sasl = {
      plain: { KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'hunter2-secret' },
      'scram-sha-256': { KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'hunter2-secret' },
      'scram-sha-512': { KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD_FILE: passwordFile },
      oauthbearer: { KAFKA_SASL_MECHANISM: 'oauthbearer', KAFKA_SASL_OAUTHBEARER_PROVIDER: provider },
    };
    test.each(Object.entries(sasl))('Kafka SASL %s without TLS: a ConfigError naming the variables, not the secret', (mechanism, env) => {
      const err = configError(() => readWorkerEnv(env));
      expect(err.message).toMatch(new RegExp(`^KAFKA_SASL_MECHANISM=${mechanism} without TLS would send the (credentials|token) over an unencrypted connection \\(SASL_PLAINTEXT\\): set KAFKA_SSL=1 .* or KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=1`));
      expect(err.message).not.toContain('hunter2-secret');
      expect(configError(() => readKafkaSecurity({ ...env, KAFKA_ALLOW_PLAINTEXT_CREDENTIALS: '0' })).message).toMatch(/without TLS/);
    });
    test.each(Object.entries(sasl))('Kafka SASL %s: with TLS, or with KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=1, accepted', (_mechanism, env) => {
      expect(describeKafkaSecurity(readKafkaSecurity({ ...env, KAFKA_SSL: '1' }))).toMatch(/^SASL_SSL /);
      expect(describeKafkaSecurity(readKafkaSecurity({ ...env, KAFKA_SSL_CA_PATH: ca }))).toMatch(/^SASL_SSL /);
      expect(describeKafkaSecurity(readKafkaSecurity({ ...env, KAFKA_ALLOW_PLAINTEXT_CREDENTIALS: '1' }))).toMatch(/^SASL_PLAINTEXT /);
    });
    test('Cassandra: a password without TLS is refused; with TLS, or with CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS=1, accepted', () => {
      const env = { CASSANDRA_USERNAME: 'kft', CASSANDRA_PASSWORD: 'cass-secret' };
      const err = configError(() => readWorkerEnv(env));
      expect(err.message).toMatch(
        /^CASSANDRA_USERNAME\/CASSANDRA_PASSWORD without TLS would send the password over an unencrypted connection: set CASSANDRA_TLS=1 .* or CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS=1/,
      );
      expect(err.message).not.toContain('cass-secret');
      expect(configError(() => readCassandraSecurity({ ...env, CASSANDRA_PASSWORD: undefined, CASSANDRA_PASSWORD_FILE: passwordFile }))).toBeInstanceOf(ConfigError);
      expect(configError(() => readCassandraSecurity({ ...env, CASSANDRA_TLS: '0', CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS: '0' })).message).toMatch(/without TLS/);
      expect(readCassandraSecurity({ ...env, CASSANDRA_TLS: '1' }).credentials?.username).toBe('kft');
      expect(readCassandraSecurity({ ...env, CASSANDRA_TLS_CA_PATH: ca }).credentials?.username).toBe('kft');
      const allowed = readCassandraSecurity({ ...env, CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS: '1' });
      expect([allowed.tls, allowed.credentials?.username]).toEqual([undefined, 'kft']);
      expect(cassandraConnectOptions(allowed).authProvider).toBeDefined();
    });
    test('the allow switches take 1/0 like the other flags, and plaintext without credentials needs none', () => {
      expect(configError(() => readKafkaSecurity({ ...sasl.plain, KAFKA_ALLOW_PLAINTEXT_CREDENTIALS: 'yes' })).message).toMatch(/KAFKA_ALLOW_PLAINTEXT_CREDENTIALS="yes": must be 1 \(on\) or 0 \(off\)/);
      expect(configError(() => readCassandraSecurity({ CASSANDRA_USERNAME: 'u', CASSANDRA_PASSWORD: 'p', CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS: 'maybe' })).message).toMatch(/CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS="maybe"/);
      expect(readSecurity({})).toMatchObject({ kafka: { ssl: undefined }, cassandra: { tls: undefined, credentials: undefined } });
    });
  });

  test('OAUTHBEARER loads the token provider module', async () => {
    const o = kafkaConnectionSecurity(readKafkaSecurity({ KAFKA_SSL: '1', KAFKA_SASL_MECHANISM: 'oauthbearer', KAFKA_SASL_OAUTHBEARER_PROVIDER: provider }));
    const sasl = o.sasl as { mechanism: string; oauthBearerProvider: () => Promise<{ value: string }> };
    expect(sasl.mechanism).toBe('oauthbearer');
    await expect(sasl.oauthBearerProvider()).resolves.toEqual({ value: 'token-1' });
    const bad = readKafkaSecurity({ KAFKA_SSL: '1', KAFKA_SASL_MECHANISM: 'oauthbearer', KAFKA_SASL_OAUTHBEARER_PROVIDER: badProvider });
    expect(configError(() => kafkaConnectionSecurity(bad)).message).toMatch(/KAFKA_SASL_OAUTHBEARER_PROVIDER=.*exports no function/);
  });

  test('Temporal: CA + client certificate (mTLS) and an API key (TLS implied)', () => {
    const o = temporalConnectOptions(
      readTemporalSecurity({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca, TEMPORAL_TLS_CLIENT_CERT_PATH: cert, TEMPORAL_TLS_CLIENT_KEY_PATH: key, TEMPORAL_TLS_SERVER_NAME: 'temporal.local' }),
    );
    expect(o).toEqual({
      tls: { serverRootCACertificate: fs.readFileSync(ca), clientCertPair: { crt: fs.readFileSync(cert), key: fs.readFileSync(key) }, serverNameOverride: 'temporal.local' },
    });
    expect(temporalConnectOptions(readTemporalSecurity({ TEMPORAL_API_KEY: 'key-1' }))).toEqual({ tls: {}, apiKey: 'key-1' });
  });

  test('Cassandra: credentials, TLS and the local data center', () => {
    const s = readCassandraSecurity({ CASSANDRA_USERNAME: 'kft', CASSANDRA_PASSWORD: 'pw', CASSANDRA_TLS_CA_PATH: ca, CASSANDRA_LOCAL_DATACENTER: 'eu-west-1' });
    expect(s.localDataCenter).toBe('eu-west-1');
    const o = cassandraConnectOptions(s);
    expect(o.sslOptions).toEqual({ rejectUnauthorized: true, ca: [fs.readFileSync(ca)] });
    expect(o.authProvider).toBeDefined();
    const authenticator = o.authProvider!.newAuthenticator('127.0.0.1:9042', 'org.apache.cassandra.auth.PasswordAuthenticator') as unknown as {
      initialResponse(cb: (err: unknown, token: Buffer) => void): void;
    };
    let token: Buffer = Buffer.alloc(0);
    authenticator.initialResponse((_err, t) => {
      token = t;
    });
    expect(token.toString()).toBe('\0kft\0pw');
  });

  test('secrets never print: inspect, JSON and string conversion show [redacted]', () => {
    const env = readWorkerEnv({
      KAFKA_SSL: '1',
      KAFKA_SASL_MECHANISM: 'plain',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD: 'hunter2-secret',
      TEMPORAL_API_KEY: 'api-key-secret',
      CASSANDRA_TLS: '1',
      CASSANDRA_USERNAME: 'c',
      CASSANDRA_PASSWORD: 'cass-secret',
    });
    const shown = [inspect(env, { depth: 10 }), JSON.stringify(env), String(new Secret('x'))].join('\n');
    for (const s of ['hunter2-secret', 'api-key-secret', 'cass-secret']) expect(shown).not.toContain(s);
    expect(shown).toContain('[redacted]');
  });

  test.each([
    [{ KAFKA_SASL_PASSWORD: 'p', KAFKA_SASL_PASSWORD_FILE: passwordFile, KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u' }, /KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are both set/],
    [{ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' }, /KAFKA_SASL_MECHANISM=plain without TLS .* KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=1/],
    [{ CASSANDRA_USERNAME: 'u', CASSANDRA_PASSWORD: 'p' }, /CASSANDRA_USERNAME\/CASSANDRA_PASSWORD without TLS .* CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS=1/],
    [{ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD_FILE: '/nonexistent/pw' }, /KAFKA_SASL_PASSWORD_FILE="\/nonexistent\/pw": cannot read the file \(ENOENT\)/],
    [{ KAFKA_SASL_MECHANISM: 'gssapi' }, /KAFKA_SASL_MECHANISM="gssapi": must be one of plain, scram-sha-256, scram-sha-512, oauthbearer/],
    [{ KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_USERNAME: 'u' }, /needs KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE/],
    [{ KAFKA_SASL_USERNAME: 'u' }, /KAFKA_SASL_USERNAME is set but KAFKA_SASL_MECHANISM is not/],
    [{ KAFKA_SASL_MECHANISM: 'oauthbearer' }, /needs KAFKA_SASL_OAUTHBEARER_PROVIDER/],
    [{ KAFKA_SSL: 'yes' }, /KAFKA_SSL="yes": must be 1 \(on\) or 0 \(off\)/],
    [{ KAFKA_SSL: '0', KAFKA_SSL_CA_PATH: ca }, /KAFKA_SSL=0 but KAFKA_SSL_\* settings are given/],
    [{ KAFKA_SSL_CERT_PATH: cert }, /KAFKA_SSL_CERT_PATH is set but KAFKA_SSL_KEY_PATH is not/],
    [{ KAFKA_SSL_CA_PATH: passwordFile }, /KAFKA_SSL_CA_PATH=.*not a PEM file/],
    [{ TEMPORAL_TLS: '0', TEMPORAL_API_KEY: 'k' }, /TEMPORAL_TLS=0 but TLS settings or an API key are given/],
    [{ TEMPORAL_TLS_CLIENT_KEY_PATH: key }, /TEMPORAL_TLS_CLIENT_KEY_PATH is set but TEMPORAL_TLS_CLIENT_CERT_PATH is not/],
    [{ CASSANDRA_USERNAME: 'u' }, /CASSANDRA_USERNAME is set but CASSANDRA_PASSWORD \(or CASSANDRA_PASSWORD_FILE\) is not/],
    [{ CASSANDRA_TLS_CA_PATH: '/nonexistent/ca.pem' }, /CASSANDRA_TLS_CA_PATH="\/nonexistent\/ca.pem": cannot read the file/],
    [{ KFT_METRICS_HOST: 'not an address' }, /KFT_METRICS_HOST=.*must be an address to bind/],
  ])('%j is a one-line ConfigError naming the variable', (env, message) => {
    const err = configError(() => readWorkerEnv(env as NodeJS.ProcessEnv));
    expect(err.message).toMatch(message);
    for (const secret of ['s3cret-from-file']) expect(err.message).not.toContain(secret);
  });

  test('KFT_METRICS_HOST defaults to 127.0.0.1', () => {
    expect(readWorkerEnv({}).metricsHost).toBe('127.0.0.1');
    expect(readWorkerEnv({ KFT_METRICS_HOST: '0.0.0.0' }).metricsHost).toBe('0.0.0.0');
    expect(readWorkerEnv({ KFT_METRICS_HOST: '[::1]' }).metricsHost).toBe('::1');
  });
});

describe('real PEM material', () => {
  test('a key and certificate made by openssl are accepted and passed on as read', () => {
    const k = path.join(dir, 'real-key.pem');
    const c = path.join(dir, 'real-cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', k, '-out', c, '-days', '1', '-subj', '/CN=test'], { stdio: 'ignore' });
    const s = readKafkaSecurity({ KAFKA_SSL_CERT_PATH: c, KAFKA_SSL_KEY_PATH: k });
    expect(s.ssl?.cert?.pem.equals(fs.readFileSync(c))).toBe(true);
    expect(s.ssl?.key?.path).toBe(k);
  });
});
