/**
 * The worker's first call to a secured Kafka: one admin connection with the process's TLS and SASL
 * settings, before anything joins a group, so that refused credentials are one line naming the
 * variables (KafkaAuthenticationError) and not a group consumer retrying its connection.
 */
import type { KafkaSecurity } from '../../config/security';
import { createKafkaClient } from '../../kafka/client';
import { KafkaAuthenticationError } from './auth-errors';
import { isKafkaConnectionFailure, KafkaUnreachableError } from './errors';

function chainText(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 10; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(e instanceof Error ? `${e.name} ${e.message} ${(e as { code?: unknown }).code ?? ''}` : String(e));
  }
  return parts.join(' | ');
}

/** A kafkajs failure as the KafkaAuthenticationError to show, or undefined when it is not about credentials or TLS. */
export function kafkaAuthFailure(brokers: readonly string[], security: KafkaSecurity | undefined, err: unknown): KafkaAuthenticationError | undefined {
  const text = chainText(err);
  const sasl = security?.sasl;
  if (/KafkaJSSASLAuthenticationError|SASL_AUTHENTICATION_FAILED|SaslAuthenticate|authentication failed|UNSUPPORTED_SASL_MECHANISM|ILLEGAL_SASL_STATE/i.test(text)) {
    const vars =
      sasl?.mechanism === 'oauthbearer'
        ? ['KAFKA_SASL_OAUTHBEARER_PROVIDER']
        : sasl
          ? ['KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD', 'KAFKA_SASL_MECHANISM']
          : ['KAFKA_SASL_MECHANISM'];
    return new KafkaAuthenticationError(brokers, vars, 'refused the SASL credentials', err);
  }
  if (/certificate|CERT_|SSL routines|handshake|alert|wrong version number|ERR_SSL|ERR_TLS|self.signed|unable to verify/i.test(text)) {
    // The broker's alert: it refused our client certificate (or wants one). Otherwise we refused its.
    if (/certificate required|alert bad certificate|alert certificate unknown|alert unknown ca/i.test(text)) {
      return new KafkaAuthenticationError(brokers, ['KAFKA_SSL_CERT_PATH', 'KAFKA_SSL_KEY_PATH'], security?.ssl?.cert ? 'refused the client certificate' : 'requires a client certificate', err);
    }
    const vars = ['KAFKA_SSL_CA_PATH', ...(security?.ssl?.serverName ? ['KAFKA_SSL_SERVER_NAME'] : [])];
    return new KafkaAuthenticationError(brokers, security?.ssl ? vars : ['KAFKA_SSL'], 'failed the TLS handshake', err);
  }
  return undefined;
}

/**
 * Connects once with the configured security (only when some is configured: a plaintext cluster
 * needs no check beyond the port probe) and describes the cluster. Throws KafkaAuthenticationError
 * for refused credentials or a failed TLS handshake, KafkaUnreachableError when the brokers took
 * the connection but never answered (e.g. TLS against a plaintext listener, or the other way round).
 */
export async function checkKafkaLogin(brokers: string[], security: KafkaSecurity | undefined): Promise<void> {
  if (!security?.ssl && !security?.sasl) return;
  const client = createKafkaClient({ brokers, clientId: 'kafka-flow-temporal-login-check', logLevel: 'nothing', security });
  const admin = client.kafka.admin({ retry: { retries: 1, initialRetryTime: 200 } });
  try {
    await admin.connect();
    await admin.describeCluster();
  } catch (err) {
    const auth = kafkaAuthFailure(brokers, security, err);
    if (auth) throw auth;
    if (isKafkaConnectionFailure(err)) {
      throw new KafkaAuthenticationError(
        brokers,
        security.ssl ? ['KAFKA_SSL', 'KAFKA_BROKERS'] : ['KAFKA_SSL', 'KAFKA_SASL_MECHANISM'],
        'closed or did not answer the secured connection (does the listener at that port speak the same security protocol?)',
        err,
      );
    }
    throw new KafkaUnreachableError(brokers, err);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}
