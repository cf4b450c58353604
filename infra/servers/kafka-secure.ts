/**
 * The local broker's secured listeners, next to its PLAINTEXT one (same broker, no extra process):
 * - SASL_SSL (`KFT_KAFKA_SASL_SSL_PORT`, default Kafka port + 2): TLS with the local CA's server
 *   certificate and SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (Kafka's built-in
 *   unsecured-JWT validator: for tests, never for production);
 * - SSL (`KFT_KAFKA_SSL_PORT`, default Kafka port + 3): TLS with a required client certificate (mTLS).
 * The SCRAM user is created with Kafka's own tools: `kafka-storage format --add-scram` for a new
 * data directory, `kafka-configs --alter --add-config SCRAM-SHA-…` for one formatted before.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { KafkaFlowError } from '../../config/errors';
import { readSecretFile, type SecureMaterial } from '../secure-material';

export interface SecureListeners {
  readonly saslSslPort: number;
  readonly sslPort: number;
  readonly material: SecureMaterial;
}

export const SASL_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'] as const;

/** The lines server.properties gets for the secured listeners (listeners themselves are added by the caller). */
export function secureListenerProperties(s: SecureListeners): string {
  const m = s.material;
  const user = m.kafkaUser;
  const password = readSecretFile(m.kafkaPasswordFile);
  return `# Secured listeners (kafka-flow-temporal infra): certificates and secrets in ${m.dir}
ssl.keystore.type=PEM
ssl.keystore.location=${m.serverKeystore}
ssl.truststore.type=PEM
ssl.truststore.location=${m.truststore}
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=${SASL_MECHANISMS.join(',')}
listener.name.sasl_ssl.sasl.enabled.mechanisms=${SASL_MECHANISMS.join(',')}
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${user}="${password}";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
`;
}

/** `--add-scram` arguments of `kafka-storage format` (both SCRAM mechanisms, the same password). */
export function scramFormatArgs(m: SecureMaterial): string[] {
  const password = readSecretFile(m.kafkaPasswordFile);
  return ['SCRAM-SHA-256', 'SCRAM-SHA-512'].flatMap((mech) => ['--add-scram', `${mech}=[name=${m.kafkaUser},password=${password}]`]);
}

/** Marks (in the broker's data dir) that its SCRAM user exists, so it is created once. */
export const scramMarker = (kafkaDataDir: string): string => path.join(kafkaDataDir, 'scram-user-created');

/**
 * For a data directory formatted before the secured listeners existed: creates the SCRAM user on
 * the running broker with `kafka-configs` (ConfigCommand), over the PLAINTEXT listener. Once.
 */
export function ensureScramUser(o: { java: string; classpath: string; log4j: string; bootstrap: string; kafkaDataDir: string; material: SecureMaterial }): boolean {
  const marker = scramMarker(o.kafkaDataDir);
  if (fs.existsSync(marker)) return false;
  const password = readSecretFile(o.material.kafkaPasswordFile);
  // One mechanism per call: the broker refuses two credentials of one user in one request.
  for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-512']) {
    try {
      execFileSync(
        o.java,
        [
          `-Dlog4j2.configurationFile=${o.log4j}`,
          '-cp',
          o.classpath,
          'kafka.admin.ConfigCommand',
          '--bootstrap-server',
          o.bootstrap,
          '--alter',
          '--add-config',
          `${mechanism}=[iterations=8192,password=${password}]`,
          '--entity-type',
          'users',
          '--entity-name',
          o.material.kafkaUser,
        ],
        { stdio: 'pipe' },
      );
    } catch (err) {
      // Neither the command line nor the tool's echo of its arguments: both hold the password.
      const why = ((err as { stderr?: Buffer }).stderr?.toString() ?? '')
        .split('\n')
        .filter((l) => /Exception|Caused by/.test(l) && !l.includes(password))
        .slice(-1)[0];
      throw new KafkaFlowError('SCRAM_USER_FAILED', `kafka-configs could not create the SCRAM user ${o.material.kafkaUser} (${mechanism}): ${why ?? 'see the broker log'}`);
    }
  }
  fs.writeFileSync(marker, '');
  return true;
}
