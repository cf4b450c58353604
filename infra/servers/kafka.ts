import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { logLevel } from 'kafkajs';
import { newKafka } from '../../kafka/client';
import { findJava17 } from '../java';
import { classpath, fetchJars } from '../maven';
import { portOpen, startDetached } from '../processes';
import { secureMaterial } from '../secure-material';
import { type InfraSettings, VERSIONS } from '../settings';
import { ensureScramUser, type SecureListeners, scramFormatArgs, scramMarker, secureListenerProperties } from './kafka-secure';
import { processFor, type Server } from './server';

/** Kafka 4.x, one combined broker+controller in KRaft mode, from Maven Central jars. */
export function kafkaServer(s: InfraSettings): Server {
  const k = s.kafka;
  const home = path.join(s.cacheDir, `kafka-${VERSIONS.kafka}`);
  const libDir = path.join(home, 'libs');
  const dataDir = path.join(s.dataDir, 'kafka');
  const logDirs = path.join(dataDir, 'log');
  const configFile = path.join(dataDir, 'server.properties');
  const address = `${k.host}:${k.port}`;
  const proc = processFor(s, 'kafka', configFile);

  return {
    name: 'kafka',
    version: VERSIONS.kafka,
    address,
    links: {},
    process: proc,
    install: async (log) =>
      (
        await fetchJars({
          cacheDir: s.cacheDir,
          libDir,
          log,
          artifacts: [
            { groupId: 'org.apache.kafka', artifactId: 'kafka_2.13', version: VERSIONS.kafka },
            // log4j2 backend; not log4j-slf4j2-impl: with Kafka's slf4j-api 1.7 it drops every log line.
            ...['log4j-api', 'log4j-core', 'log4j-slf4j-impl'].map((artifactId) => ({
              groupId: 'org.apache.logging.log4j',
              artifactId,
              version: VERSIONS.log4j,
            })),
          ],
        })
      ).fetched,
    start: async (log) => {
      const java = findJava17();
      fs.mkdirSync(logDirs, { recursive: true });
      const secure = secureListeners(s);
      fs.writeFileSync(configFile, serverProperties(s, logDirs, secure));
      const log4j = path.join(dataDir, 'log4j2.properties');
      fs.writeFileSync(log4j, KAFKA_LOG4J2);
      const cp = classpath(libDir);
      if (!fs.existsSync(path.join(logDirs, 'meta.properties'))) {
        log('formatting the KRaft storage');
        execFileSync(
          java,
          [
            `-Dlog4j2.configurationFile=${log4j}`,
            '-cp',
            cp,
            'kafka.tools.StorageTool',
            'format',
            '-t',
            kafkaClusterId(),
            '-c',
            configFile,
            ...scramFormatArgs(secure.material),
          ],
          { stdio: 'pipe' },
        );
        fs.writeFileSync(scramMarker(dataDir), '');
      }
      startDetached(proc, java, kafkaJvmArgs({ heapMb: k.heapMb, log4j, logsDir: dataDir, classpath: cp, configFile }));
    },
    probe: async () => {
      if (!(await portOpen(k.host, k.port))) return false;
      const admin = newKafka({
        brokers: [address],
        logLevel: logLevel.NOTHING,
        connectionTimeout: 2000,
        requestTimeout: 3000,
        retry: { retries: 0 },
      }).admin();
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        return cluster.brokers.length > 0;
      } catch {
        return false;
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    },
    afterReady: async (log) => {
      // A broker answers metadata long before its group and transaction coordinators have loaded
      // __consumer_offsets / __transaction_state, and kafkajs does not retry NOT_COORDINATOR on
      // TxnOffsetCommit. So "ready" here means: one transaction with sendOffsets has committed.
      const deadline = Date.now() + 60_000;
      for (let attempt = 1; ; attempt++) {
        try {
          await warmUpTransactions(address);
          if (attempt > 1) log(`coordinators ready after ${attempt} attempts`);
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      // A data directory formatted before the secured listeners: create the SCRAM user now (once).
      if (fs.existsSync(path.join(logDirs, 'meta.properties')) && !fs.existsSync(scramMarker(dataDir))) {
        const material = secureListeners(s).material;
        const created = ensureScramUser({
          java: findJava17(),
          classpath: classpath(libDir),
          log4j: path.join(dataDir, 'log4j2.properties'),
          bootstrap: address,
          kafkaDataDir: dataDir,
          material,
        });
        if (created) log(`created the SCRAM user ${material.kafkaUser} (kafka-configs)`);
      }
    },
  };
}

async function warmUpTransactions(address: string): Promise<void> {
  const kafka = newKafka({ brokers: [address], logLevel: logLevel.NOTHING, retry: { retries: 2 } });
  const admin = kafka.admin();
  const producer = kafka.producer({ transactionalId: 'kafka-flow-temporal-infra-warmup', idempotent: true, maxInFlightRequests: 1 });
  try {
    await admin.connect();
    const topics = await admin.listTopics();
    if (!topics.includes(WARMUP_TOPIC)) {
      await admin.createTopics({ topics: [{ topic: WARMUP_TOPIC, numPartitions: 1 }], waitForLeaders: true }).catch(() => false);
    }
    await producer.connect();
    const txn = await producer.transaction();
    try {
      await txn.sendOffsets({
        consumerGroupId: 'kafka-flow-temporal-infra-warmup',
        topics: [{ topic: WARMUP_TOPIC, partitions: [{ partition: 0, offset: '0' }] }],
      });
      await txn.commit();
    } catch (err) {
      await txn.abort().catch(() => undefined);
      throw err;
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
  }
}

/** Kafka 4 checks that the topic of a TxnOffsetCommit exists, so the warm-up has its own. */
const WARMUP_TOPIC = 'kafka-flow-temporal-infra-warmup';

/** The JVM command line of `kafka.Kafka`; `jvmFlags` go before the classpath (e.g. a cheaper JIT for a short-lived broker). */
export function kafkaJvmArgs(o: { heapMb: number; log4j: string; logsDir: string; classpath: string; configFile: string; jvmFlags?: string[] }): string[] {
  return [
    `-Xms${o.heapMb}m`,
    `-Xmx${o.heapMb}m`,
    '-XX:+UseG1GC',
    ...(o.jvmFlags ?? []),
    '-Djava.awt.headless=true',
    `-Dlog4j2.configurationFile=${o.log4j}`,
    `-Dkafka.logs.dir=${o.logsDir}`,
    '-cp',
    o.classpath,
    'kafka.Kafka',
    o.configFile,
  ];
}

/** 16 random bytes, base64url; the storage tool rejects ids starting with '-'. */
export function kafkaClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** A listener besides PLAINTEXT and CONTROLLER (e.g. the chaos suite's PROXIED, advertised at its proxy). */
export interface ExtraListener {
  readonly name: string;
  readonly port: number;
  readonly advertisedPort: number;
}

export interface KafkaPropertiesOptions {
  readonly host: string;
  readonly port: number;
  readonly controllerPort: number;
  readonly logDirs: string;
  /** The first line(s), without '#': who wrote the file and what for. */
  readonly comment: string;
  readonly extraListener?: ExtraListener;
  /** The SASL_SSL and SSL (mTLS) listeners (infra/servers/kafka-secure.ts); none when absent. */
  readonly secure?: SecureListeners;
}

/** server.properties of a single-node KRaft broker+controller, tuned for development and tests. */
export function kafkaServerProperties(o: KafkaPropertiesOptions): string {
  const x = o.extraListener;
  const sec = o.secure ? [`SASL_SSL://${o.host}:${o.secure.saslSslPort}`, `SSL://${o.host}:${o.secure.sslPort}`] : [];
  const listeners = [`PLAINTEXT://${o.host}:${o.port}`, `CONTROLLER://${o.host}:${o.controllerPort}`, ...(x ? [`${x.name}://${o.host}:${x.port}`] : []), ...sec];
  const advertised = [`PLAINTEXT://${o.host}:${o.port}`, ...(x ? [`${x.name}://${o.host}:${x.advertisedPort}`] : []), ...sec];
  const protocols = ['PLAINTEXT:PLAINTEXT', 'CONTROLLER:PLAINTEXT', ...(x ? [`${x.name}:PLAINTEXT`] : []), ...(o.secure ? ['SASL_SSL:SASL_SSL', 'SSL:SSL'] : [])];
  return `${o.comment
    .split('\n')
    .map((l) => `# ${l}`)
    .join('\n')}
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@${o.host}:${o.controllerPort}
listeners=${listeners.join(',')}
advertised.listeners=${advertised.join(',')}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=${protocols.join(',')}
log.dirs=${o.logDirs}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Timed-out transactions are aborted within seconds instead of the default 10 s scan.
transaction.abort.timed.out.transaction.cleanup.interval.ms=2000
log.cleaner.backoff.ms=1000
${o.secure ? secureListenerProperties(o.secure) : ''}`;
}

/** The local broker's secured listeners: ports from the settings, certificates and secrets made once. */
export function secureListeners(s: InfraSettings): SecureListeners {
  return { saslSslPort: s.kafka.saslSslPort, sslPort: s.kafka.sslPort, material: secureMaterial(s.dataDir) };
}

function serverProperties(s: InfraSettings, logDirs: string, secure: SecureListeners): string {
  const k = s.kafka;
  return kafkaServerProperties({
    host: k.host,
    port: k.port,
    controllerPort: k.controllerPort,
    logDirs,
    secure,
    comment: 'Written by kafka-flow-temporal infra: a single-node KRaft broker+controller for development and tests.',
  });
}

export const KAFKA_LOG4J2 = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
logger.controller.name = org.apache.kafka.controller
logger.controller.level = warn
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = warn
`;
