import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { KafkaFlowError } from '../config/errors';

/**
 * Kafka runs on 17+, Cassandra 5.0 only on 17 (it installs a SecurityManager, which Java 18+
 * refuses), so both get a Java 17 explicitly — never whatever JAVA_HOME happens to point at.
 */
export function findJava17(env: NodeJS.ProcessEnv = process.env): string {
  const candidates = [
    env.KFT_JAVA17,
    '/usr/lib/jvm/java-17-openjdk-amd64/bin/java',
    '/usr/lib/jvm/java-17-openjdk-arm64/bin/java',
    '/usr/lib/jvm/temurin-17-jdk-amd64/bin/java',
    'java',
  ].filter((c): c is string => Boolean(c));
  for (const java of candidates) {
    if (java.includes('/') && !fs.existsSync(java)) continue;
    if (javaMajor(java) === 17) return java;
  }
  throw new KafkaFlowError(
    'JAVA17_MISSING',
    'no Java 17 found (Kafka and Cassandra 5.0 need it): install it (apt-get install -y openjdk-17-jre-headless) or set KFT_JAVA17 to its java binary',
  );
}

function javaMajor(java: string): number | undefined {
  // `java -version` writes to stderr; the properties dump names the spec version exactly.
  const r = spawnSync(java, ['-XshowSettings:properties', '-version'], { encoding: 'utf8' });
  const m = /java\.specification\.version = (\d+)/.exec(`${r.stdout ?? ''}${r.stderr ?? ''}`);
  return m ? Number(m[1]) : undefined;
}
