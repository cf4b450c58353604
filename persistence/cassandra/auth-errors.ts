/**
 * The Cassandra driver's "refused" errors as one line naming the variables to check. Apart from
 * connect-options (which loads the driver) so that the package's entry point can export the error
 * class without loading cassandra-driver in workers of Kafka flows.
 */
import { KafkaFlowError } from '../../config/errors';
import type { CassandraSecurity } from '../../config/security';

/**
 * Cassandra refused this client: a username or password it does not accept (PasswordAuthenticator),
 * credentials it asks for and were not given, a client certificate it does not trust, or a server
 * certificate this client does not trust. Not an outage: retrying does not help.
 */
export class CassandraAuthenticationError extends KafkaFlowError {
  readonly variables: readonly string[];
  constructor(contactPoints: readonly string[], variables: readonly string[], what: string, cause: unknown) {
    super('CASSANDRA_AUTH', `Cassandra at CASSANDRA_CONTACT_POINTS=${contactPoints.join(',')} ${what}: check ${variables.join(', ')} (${innerText(cause)})`, { cause });
    this.variables = variables;
  }
}

/** The first inner error of a NoHostAvailableError (the driver's "every host failed"), or the error itself. */
function inner(err: unknown): unknown {
  const innerErrors = (err as { innerErrors?: Record<string, unknown> } | null)?.innerErrors;
  const first = innerErrors ? Object.values(innerErrors)[0] : undefined;
  return first ?? err;
}

/** The driver error's first line (its first inner error's, for "every host failed"), at most 300 characters. */
export function innerText(err: unknown): string {
  const e = inner(err);
  const text = e instanceof Error ? `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}` : String(e);
  return text.split('\n')[0]!.slice(0, 300);
}

/** A connect failure as the CassandraAuthenticationError to show, or undefined when it is not about credentials or TLS. */
export function cassandraAuthFailure(contactPoints: readonly string[], security: CassandraSecurity | undefined, err: unknown): CassandraAuthenticationError | undefined {
  const innerErrors = (err as { innerErrors?: Record<string, unknown> } | null)?.innerErrors;
  const errors = innerErrors ? Object.values(innerErrors) : [err];
  const text = errors.map((e) => (e instanceof Error ? `${e.name} ${e.message} ${(e as { code?: unknown }).code ?? ''}` : String(e))).join(' | ');
  if (/AuthenticationError|Authentication provider not set|requires authentication|username .* password .* incorrect|PasswordAuthenticator/i.test(text)) {
    const vars = security?.credentials ? ['CASSANDRA_USERNAME', 'CASSANDRA_PASSWORD'] : ['CASSANDRA_USERNAME', 'CASSANDRA_PASSWORD (not set)'];
    return new CassandraAuthenticationError(contactPoints, vars, 'refused the credentials', err);
  }
  if (/certificate|CERT_|SSL routines|handshake|alert|wrong version number|ERR_SSL|ERR_TLS|self.signed|unable to verify|secure TLS connection/i.test(text)) {
    // The server's alert: it refused our client certificate (or wants one). Otherwise we refused its.
    if (/certificate required|alert bad certificate|alert certificate unknown|alert unknown ca|alert handshake failure/i.test(text)) {
      return new CassandraAuthenticationError(contactPoints, ['CASSANDRA_TLS_CERT_PATH', 'CASSANDRA_TLS_KEY_PATH'], security?.tls?.cert ? 'refused the client certificate' : 'requires a client certificate', err);
    }
    const vars = ['CASSANDRA_TLS_CA_PATH', ...(security?.tls?.serverName ? ['CASSANDRA_TLS_SERVER_NAME'] : [])];
    return new CassandraAuthenticationError(contactPoints, security?.tls ? vars : ['CASSANDRA_TLS'], 'failed the TLS handshake', err);
  }
  return undefined;
}
