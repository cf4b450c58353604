import fs from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import { z } from 'zod';
import { ConfigError } from './errors';

/**
 * The connection security of the three servers (README, *Production connectivity*): TLS, client
 * certificates, SASL, API keys, passwords. Parsed and validated here, once, so that a wrong value
 * stops the command with one line naming the variable. Secrets come from the variable itself or
 * from a file named by `<NAME>_FILE` (never both); they are held in `Secret`s, which print as
 * `[redacted]` wherever they end up (a log line, an error, `JSON.stringify`).
 */

/** A secret value: `reveal()` gives it to the client library; everything else sees `[redacted]`. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return '[redacted]';
  }
  toJSON(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return '[redacted]';
  }
}

/** A PEM file read at start (a missing or unreadable file is a ConfigError naming its variable). */
export interface PemFile {
  readonly path: string;
  readonly pem: Buffer;
}

export type KafkaSaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512' | 'oauthbearer';
export const KAFKA_SASL_MECHANISMS: readonly KafkaSaslMechanism[] = ['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer'];

export interface KafkaSecurity {
  /** TLS to the brokers (`KAFKA_SSL=1`, or any `KAFKA_SSL_*` file); undefined: plaintext. */
  readonly ssl?: {
    readonly ca?: PemFile;
    readonly cert?: PemFile;
    readonly key?: PemFile;
    readonly keyPassword?: Secret;
    readonly serverName?: string;
  };
  readonly sasl?:
    | { readonly mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; readonly username: string; readonly password: Secret }
    /** `provider`: the absolute path of a module whose default (or `oauthBearerProvider`) export returns `{ value: token }`. */
    | { readonly mechanism: 'oauthbearer'; readonly provider: string };
}

export interface TemporalSecurity {
  /** TLS to the frontend (`TEMPORAL_TLS=1`, any `TEMPORAL_TLS_*` setting, or an API key); undefined: plaintext. */
  readonly tls?: {
    readonly ca?: PemFile;
    readonly cert?: PemFile;
    readonly key?: PemFile;
    readonly serverName?: string;
  };
  /** `TEMPORAL_API_KEY` (Temporal Cloud): sent as `Authorization: Bearer <key>`. */
  readonly apiKey?: Secret;
}

export interface CassandraSecurity {
  /** `CASSANDRA_LOCAL_DATACENTER`; undefined: the flow's `localDataCenter` or `datacenter1`. */
  readonly localDataCenter?: string;
  readonly credentials?: { readonly username: string; readonly password: Secret };
  readonly tls?: {
    readonly ca?: PemFile;
    readonly cert?: PemFile;
    readonly key?: PemFile;
    readonly serverName?: string;
  };
}

export interface Security {
  readonly kafka: KafkaSecurity;
  readonly temporal: TemporalSecurity;
  readonly cassandra: CassandraSecurity;
}

/** Every variable this module reads, for the README and the tests. */
export const SECURITY_VARIABLES = [
  'KAFKA_SSL',
  'KAFKA_SSL_CA_PATH',
  'KAFKA_SSL_CERT_PATH',
  'KAFKA_SSL_KEY_PATH',
  'KAFKA_SSL_KEY_PASSWORD',
  'KAFKA_SSL_SERVER_NAME',
  'KAFKA_SASL_MECHANISM',
  'KAFKA_SASL_USERNAME',
  'KAFKA_SASL_PASSWORD',
  'KAFKA_SASL_OAUTHBEARER_PROVIDER',
  'KAFKA_ALLOW_PLAINTEXT_CREDENTIALS',
  'TEMPORAL_TLS',
  'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
  'TEMPORAL_TLS_CLIENT_CERT_PATH',
  'TEMPORAL_TLS_CLIENT_KEY_PATH',
  'TEMPORAL_TLS_SERVER_NAME',
  'TEMPORAL_API_KEY',
  'CASSANDRA_LOCAL_DATACENTER',
  'CASSANDRA_USERNAME',
  'CASSANDRA_PASSWORD',
  'CASSANDRA_TLS',
  'CASSANDRA_TLS_CA_PATH',
  'CASSANDRA_TLS_CERT_PATH',
  'CASSANDRA_TLS_KEY_PATH',
  'CASSANDRA_TLS_SERVER_NAME',
  'CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS',
] as const;

type Env = NodeJS.ProcessEnv;

/** config/env's `envValue`, repeated here so that env.ts can build on this module without a cycle. */
function envValue<T>(name: string, schema: z.ZodType<T>, raw: string): T {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(`${name}=${JSON.stringify(raw)}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

/** Unset and empty are the same ("not set"), as for the worker's other variables. */
const given = (env: Env, name: string): string | undefined => {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
};

const onOff = z.enum(['0', '1', 'true', 'false'], { message: 'must be 1 (on) or 0 (off)' }).transform((v) => v === '1' || v === 'true');

function flag(env: Env, name: string): boolean | undefined {
  const raw = given(env, name);
  return raw === undefined ? undefined : envValue(name, onOff, raw);
}

/**
 * A secret from `NAME` or from the file `NAME_FILE` (its content, one trailing newline dropped).
 * Both set is an error: which one wins would be a guess. The message never quotes the value.
 */
export function secret(env: Env, name: string): Secret | undefined {
  const inline = given(env, name);
  const file = given(env, `${name}_FILE`);
  if (inline !== undefined && file !== undefined) throw new ConfigError(`${name} and ${name}_FILE are both set: set one of them`);
  if (inline !== undefined) return new Secret(inline);
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}_FILE=${JSON.stringify(file)}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new ConfigError(`${name}_FILE=${JSON.stringify(file)}: the file is empty`);
  return new Secret(value);
}

/** A PEM file named by `name`; it must exist and hold at least one PEM block. */
export function pemFile(env: Env, name: string): PemFile | undefined {
  const file = given(env, name);
  if (file === undefined) return undefined;
  let pem: Buffer;
  try {
    pem = fs.readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${name}=${JSON.stringify(file)}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
  }
  if (!pem.toString('latin1').includes('-----BEGIN ')) throw new ConfigError(`${name}=${JSON.stringify(file)}: not a PEM file (no "-----BEGIN" line)`);
  return { path: path.resolve(file), pem };
}

function certAndKey(env: Env, certName: string, keyName: string): { cert?: PemFile; key?: PemFile } {
  const cert = pemFile(env, certName);
  const key = pemFile(env, keyName);
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError(`${cert ? certName : keyName} is set but ${cert ? keyName : certName} is not: a client certificate needs its private key (and the key its certificate)`);
  }
  return { cert, key };
}

export function readKafkaSecurity(env: Env = process.env): KafkaSecurity {
  const ca = pemFile(env, 'KAFKA_SSL_CA_PATH');
  const { cert, key } = certAndKey(env, 'KAFKA_SSL_CERT_PATH', 'KAFKA_SSL_KEY_PATH');
  const keyPassword = secret(env, 'KAFKA_SSL_KEY_PASSWORD');
  const serverName = given(env, 'KAFKA_SSL_SERVER_NAME');
  const anyFile = ca !== undefined || cert !== undefined || keyPassword !== undefined || serverName !== undefined;
  const sslFlag = flag(env, 'KAFKA_SSL');
  if (sslFlag === false && anyFile) throw new ConfigError('KAFKA_SSL=0 but KAFKA_SSL_* settings are given: remove them or set KAFKA_SSL=1');
  if (keyPassword !== undefined && key === undefined) throw new ConfigError('KAFKA_SSL_KEY_PASSWORD is set but KAFKA_SSL_KEY_PATH is not');
  const ssl = sslFlag || anyFile ? { ca, cert, key, keyPassword, serverName } : undefined;

  const mechanismRaw = given(env, 'KAFKA_SASL_MECHANISM');
  const username = given(env, 'KAFKA_SASL_USERNAME');
  const password = secret(env, 'KAFKA_SASL_PASSWORD');
  const providerRaw = given(env, 'KAFKA_SASL_OAUTHBEARER_PROVIDER');
  if (mechanismRaw === undefined) {
    const stray = username !== undefined ? 'KAFKA_SASL_USERNAME' : password !== undefined ? 'KAFKA_SASL_PASSWORD' : providerRaw !== undefined ? 'KAFKA_SASL_OAUTHBEARER_PROVIDER' : undefined;
    if (stray) throw new ConfigError(`${stray} is set but KAFKA_SASL_MECHANISM is not (one of ${KAFKA_SASL_MECHANISMS.join(', ')})`);
    return { ssl };
  }
  const mechanism = envValue(
    'KAFKA_SASL_MECHANISM',
    z
      .string()
      .transform((s) => s.toLowerCase())
      .pipe(z.enum(KAFKA_SASL_MECHANISMS as [KafkaSaslMechanism, ...KafkaSaslMechanism[]], { message: `must be one of ${KAFKA_SASL_MECHANISMS.join(', ')}` })),
    mechanismRaw,
  );
  if (mechanism === 'oauthbearer') {
    if (providerRaw === undefined) {
      throw new ConfigError('KAFKA_SASL_MECHANISM=oauthbearer needs KAFKA_SASL_OAUTHBEARER_PROVIDER: the path of a module exporting an async function that returns { value: token }');
    }
    if (username !== undefined || password !== undefined) throw new ConfigError('KAFKA_SASL_MECHANISM=oauthbearer takes no KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD: the token provider authenticates');
    const provider = path.resolve(providerRaw);
    if (!fs.existsSync(provider)) throw new ConfigError(`KAFKA_SASL_OAUTHBEARER_PROVIDER=${JSON.stringify(providerRaw)}: no such file`);
    refuseKafkaCredentialsInTheClear(env, mechanism, ssl !== undefined);
    return { ssl, sasl: { mechanism, provider } };
  }
  if (providerRaw !== undefined) throw new ConfigError(`KAFKA_SASL_OAUTHBEARER_PROVIDER is set but KAFKA_SASL_MECHANISM=${mechanism}: it is for oauthbearer only`);
  if (username === undefined) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME`);
  if (password === undefined) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE`);
  refuseKafkaCredentialsInTheClear(env, mechanism, ssl !== undefined);
  return { ssl, sasl: { mechanism, username, password } };
}

/**
 * SASL without TLS (SASL_PLAINTEXT) sends the credentials over an unencrypted connection — PLAIN
 * the password itself, OAUTHBEARER the token; a SCRAM exchange can be recorded for offline
 * guessing and the session taken over — so it is refused unless KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=1
 * says the network is trusted (as an API key is never sent to Temporal without TLS).
 */
function refuseKafkaCredentialsInTheClear(env: Env, mechanism: KafkaSaslMechanism, ssl: boolean): void {
  if (ssl || flag(env, 'KAFKA_ALLOW_PLAINTEXT_CREDENTIALS')) return;
  throw new ConfigError(
    `KAFKA_SASL_MECHANISM=${mechanism} without TLS would send the ${mechanism === 'oauthbearer' ? 'token' : 'credentials'} over an unencrypted connection (SASL_PLAINTEXT): ` +
      'set KAFKA_SSL=1 (and KAFKA_SSL_CA_PATH unless the brokers have publicly trusted certificates) for SASL_SSL, ' +
      'or KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=1 on a network you trust',
  );
}

export function readTemporalSecurity(env: Env = process.env): TemporalSecurity {
  const ca = pemFile(env, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH');
  const { cert, key } = certAndKey(env, 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH');
  const serverName = given(env, 'TEMPORAL_TLS_SERVER_NAME');
  const apiKey = secret(env, 'TEMPORAL_API_KEY');
  const tlsFlag = flag(env, 'TEMPORAL_TLS');
  const implied = ca !== undefined || cert !== undefined || serverName !== undefined || apiKey !== undefined;
  if (tlsFlag === false && implied) {
    throw new ConfigError('TEMPORAL_TLS=0 but TLS settings or an API key are given (an API key is only ever sent over TLS): remove them or set TEMPORAL_TLS=1');
  }
  return { tls: tlsFlag || implied ? { ca, cert, key, serverName } : undefined, apiKey };
}

export function readCassandraSecurity(env: Env = process.env): CassandraSecurity {
  const localDataCenter = given(env, 'CASSANDRA_LOCAL_DATACENTER');
  const username = given(env, 'CASSANDRA_USERNAME');
  const password = secret(env, 'CASSANDRA_PASSWORD');
  if ((username === undefined) !== (password === undefined)) {
    throw new ConfigError(username ? 'CASSANDRA_USERNAME is set but CASSANDRA_PASSWORD (or CASSANDRA_PASSWORD_FILE) is not' : 'CASSANDRA_PASSWORD is set but CASSANDRA_USERNAME is not');
  }
  const ca = pemFile(env, 'CASSANDRA_TLS_CA_PATH');
  const { cert, key } = certAndKey(env, 'CASSANDRA_TLS_CERT_PATH', 'CASSANDRA_TLS_KEY_PATH');
  const serverName = given(env, 'CASSANDRA_TLS_SERVER_NAME');
  const tlsFlag = flag(env, 'CASSANDRA_TLS');
  const implied = ca !== undefined || cert !== undefined || serverName !== undefined;
  if (tlsFlag === false && implied) throw new ConfigError('CASSANDRA_TLS=0 but CASSANDRA_TLS_* settings are given: remove them or set CASSANDRA_TLS=1');
  // PasswordAuthenticator sends the password as it is: over plaintext only when allowed explicitly.
  const tls = tlsFlag || implied;
  if (username !== undefined && !tls && !flag(env, 'CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS')) {
    throw new ConfigError(
      'CASSANDRA_USERNAME/CASSANDRA_PASSWORD without TLS would send the password over an unencrypted connection: ' +
        'set CASSANDRA_TLS=1 (and CASSANDRA_TLS_CA_PATH unless the nodes have publicly trusted certificates), ' +
        'or CASSANDRA_ALLOW_PLAINTEXT_CREDENTIALS=1 on a network you trust',
    );
  }
  return {
    localDataCenter,
    credentials: username !== undefined && password !== undefined ? { username, password } : undefined,
    tls: tls ? { ca, cert, key, serverName } : undefined,
  };
}

export function readSecurity(env: Env = process.env): Security {
  return { kafka: readKafkaSecurity(env), temporal: readTemporalSecurity(env), cassandra: readCassandraSecurity(env) };
}

/** How a connection is secured, in words for a log line (no secrets): e.g. `SASL_SSL scram-sha-256 as alice`. */
export function describeKafkaSecurity(s: KafkaSecurity): string {
  const protocol = s.sasl ? (s.ssl ? 'SASL_SSL' : 'SASL_PLAINTEXT') : s.ssl ? 'SSL' : 'PLAINTEXT';
  const parts = [protocol];
  if (s.sasl) parts.push(s.sasl.mechanism, ...(s.sasl.mechanism === 'oauthbearer' ? [] : ['as', s.sasl.username]));
  if (s.ssl?.cert) parts.push('with a client certificate');
  return parts.join(' ');
}

export function describeTemporalSecurity(s: TemporalSecurity): string {
  if (!s.tls) return 'plaintext';
  return ['TLS', ...(s.tls.cert ? ['with a client certificate'] : []), ...(s.apiKey ? ['with an API key'] : [])].join(' ');
}

export function describeCassandraSecurity(s: CassandraSecurity): string {
  return [s.tls ? 'TLS' : 'plaintext', ...(s.tls?.cert ? ['with a client certificate'] : []), ...(s.credentials ? ['as', s.credentials.username] : [])].join(' ');
}
