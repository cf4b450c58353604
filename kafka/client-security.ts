/**
 * KAFKA_SSL_* / KAFKA_SASL_* (parsed in config/security) as kafkajs's `ssl` and `sasl` options,
 * shared by every client of the process: consumers, producers, admins and the group-less readers.
 */
import type { ConnectionOptions } from 'node:tls';
import type { SASLOptions } from 'kafkajs';
import { ConfigError } from '../config/errors';
import type { KafkaSecurity } from '../config/security';

export interface KafkaConnectionSecurity {
  readonly ssl?: ConnectionOptions | true;
  readonly sasl?: SASLOptions;
}

/** What an OAUTHBEARER token provider module returns: kafkajs's `OauthbearerProviderResponse`. */
export interface OauthBearerToken {
  value: string;
}

export type OauthBearerProvider = () => Promise<OauthBearerToken>;

/**
 * Loads KAFKA_SASL_OAUTHBEARER_PROVIDER: a module (.js, or .ts under the CLI) whose default export
 * or `oauthBearerProvider` export is an async function returning `{ value: token }`. kafkajs calls
 * it for every new broker connection and re-authentication; caching and refreshing the token is
 * the module's business (e.g. a client-credentials grant against the identity provider).
 */
export function loadOauthBearerProvider(modulePath: string): OauthBearerProvider {
  let loaded: unknown;
  try {
    loaded = require(modulePath);
  } catch (err) {
    throw new ConfigError(`KAFKA_SASL_OAUTHBEARER_PROVIDER=${JSON.stringify(modulePath)}: the module failed to load (${(err as Error).message.split('\n')[0]})`, {
      cause: err,
    });
  }
  const m = loaded as { default?: unknown; oauthBearerProvider?: unknown } | undefined;
  const fn = typeof loaded === 'function' ? loaded : typeof m?.default === 'function' ? m.default : m?.oauthBearerProvider;
  if (typeof fn !== 'function') {
    throw new ConfigError(
      `KAFKA_SASL_OAUTHBEARER_PROVIDER=${JSON.stringify(modulePath)}: the module exports no function (export default async () => ({ value: token }), or a named oauthBearerProvider)`,
    );
  }
  const provider = fn as () => unknown;
  return async () => {
    const token = (await provider()) as OauthBearerToken | undefined;
    if (!token || typeof token.value !== 'string' || token.value === '') {
      throw new ConfigError(`KAFKA_SASL_OAUTHBEARER_PROVIDER=${JSON.stringify(modulePath)}: the provider returned no token (it must return { value: token })`);
    }
    return { value: token.value };
  };
}

/** kafkajs's options for `security`; nothing (plaintext, no SASL) for undefined or an empty one. */
export function kafkaConnectionSecurity(security: KafkaSecurity | undefined): KafkaConnectionSecurity {
  if (!security) return {};
  const s = security.ssl;
  const ssl: ConnectionOptions | true | undefined = s
    ? s.ca || s.cert || s.serverName
      ? {
          ...(s.ca ? { ca: [s.ca.pem] } : {}),
          ...(s.cert && s.key ? { cert: s.cert.pem, key: s.key.pem } : {}),
          ...(s.keyPassword ? { passphrase: s.keyPassword.reveal() } : {}),
          ...(s.serverName ? { servername: s.serverName } : {}),
        }
      : true
    : undefined;
  const a = security.sasl;
  let sasl: SASLOptions | undefined;
  if (a?.mechanism === 'oauthbearer') sasl = { mechanism: 'oauthbearer', oauthBearerProvider: loadOauthBearerProvider(a.provider) };
  else if (a) sasl = { mechanism: a.mechanism, username: a.username, password: a.password.reveal() } as SASLOptions;
  return { ...(ssl ? { ssl } : {}), ...(sasl ? { sasl } : {}) };
}
