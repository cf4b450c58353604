import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { up } from '../infra/infra';
import { findJava17 } from '../infra/java';
import { classpath } from '../infra/maven';
import { livePid, portOpen, startDetached, stopProcess } from '../infra/processes';
import { cassandraServer } from '../infra/servers/cassandra';
import { KAFKA_LOG4J2, kafkaClusterId, kafkaJvmArgs, kafkaServer, kafkaServerProperties } from '../infra/servers/kafka';
import type { Server } from '../infra/servers/server';
import { temporalServer } from '../infra/servers/temporal';
import { type InfraSettings, readInfraSettings, VERSIONS } from '../infra/settings';

/**
 * The chaos run's PRIVATE servers: Kafka, Temporal and (optionally) Cassandra on their own ports
 * with their own data dir, so the servers other people use are never touched. Temporal and
 * Cassandra come from the project's infra code (`up` with a private environment). Kafka too, but
 * with its own server.properties: a second listener (PROXIED) whose advertised port is the chaos
 * TCP proxy's, so that workers, bootstrapped through the proxy, keep going through it for every
 * broker connection, while the driver (producer, sampler, oracle) talks to the broker directly.
 */
export interface ChaosPorts {
  kafka: number;
  kafkaController: number;
  /** The broker's PROXIED listener: the proxy forwards here. */
  kafkaProxied: number;
  /** The proxy in front of the broker: what the PROXIED listener advertises. */
  kafkaProxy: number;
  temporal: number;
  temporalProxy: number;
  temporalUi: number;
  cassandra: number;
  cassandraStorage: number;
}

/** Below the ephemeral range (32768+), where the Temporal dev server's internal ports land. */
export const portsFrom = (base: number): ChaosPorts => ({
  kafka: base + 92,
  kafkaController: base + 93,
  kafkaProxied: base + 94,
  kafkaProxy: base + 95,
  temporal: base + 233,
  temporalProxy: base + 234,
  temporalUi: base + 235,
  cassandra: base + 42,
  cassandraStorage: base + 700,
});

const HOST = '127.0.0.1';

export class PrivateServers {
  readonly settings: InfraSettings;
  /** For the driver: the servers directly. */
  readonly directEnv: Record<string, string>;
  /** For workers: the broker and Temporal through the proxies. */
  readonly workerEnv: Record<string, string>;
  private readonly kafka: Server;
  private readonly temporal: Server;
  private readonly cassandra?: Server;

  constructor(
    readonly dataDir: string,
    readonly ports: ChaosPorts,
    readonly withCassandra: boolean,
  ) {
    const p = ports;
    this.directEnv = {
      KAFKA_BROKERS: `${HOST}:${p.kafka}`,
      KFT_KAFKA_CONTROLLER_PORT: String(p.kafkaController),
      TEMPORAL_ADDRESS: `${HOST}:${p.temporal}`,
      TEMPORAL_UI_PORT: String(p.temporalUi),
      CASSANDRA_CONTACT_POINTS: `${HOST}:${p.cassandra}`,
      KFT_CASSANDRA_STORAGE_PORT: String(p.cassandraStorage),
      KFT_CASSANDRA_HEAP_MB: process.env.CHAOS_CASSANDRA_HEAP_MB ?? '768',
      KFT_DATA_DIR: dataDir,
      KFT_INFRA_SERVERS: withCassandra ? 'kafka,temporal,cassandra' : 'kafka,temporal',
    };
    this.workerEnv = {
      KAFKA_BROKERS: `${HOST}:${p.kafkaProxy}`,
      TEMPORAL_ADDRESS: `${HOST}:${p.temporalProxy}`,
      CASSANDRA_CONTACT_POINTS: `${HOST}:${p.cassandra}`,
    };
    this.settings = readInfraSettings({ ...process.env, ...this.directEnv });
    this.kafka = kafkaServer(this.settings);
    this.temporal = temporalServer(this.settings);
    if (withCassandra) this.cassandra = cassandraServer(this.settings);
  }

  /** Fails when any port is taken: never start next to (or talk to) someone else's server. */
  async checkPortsFree(): Promise<void> {
    const wanted = Object.entries(this.ports).filter(([k]) => this.withCassandra || !k.startsWith('cassandra'));
    const taken: string[] = [];
    for (const [name, port] of wanted) if (await portOpen(HOST, port, 500)) taken.push(`${name} ${port}`);
    if (taken.length > 0) throw new Error(`chaos: ports already in use (${taken.join(', ')}); pick another base with --port-base`);
  }

  async up(log: (line: string) => void): Promise<void> {
    await this.checkPortsFree();
    const others = readInfraSettings({
      ...process.env,
      ...this.directEnv,
      KFT_INFRA_SERVERS: this.withCassandra ? 'temporal,cassandra' : 'temporal',
    });
    await Promise.all([this.startKafka(log, true), up(others, log)]);
  }

  get kafkaLog(): string {
    return this.kafka.process.logFile;
  }

  /** Writes the two-listener config (first time: formats the storage), spawns, waits for a committed transaction. */
  async startKafka(log: (line: string) => void = () => {}, first = false): Promise<void> {
    const s = this.settings;
    const dataDir = path.join(s.dataDir, 'kafka');
    const logDirs = path.join(dataDir, 'log');
    const configFile = path.join(dataDir, 'server.properties');
    const libDir = path.join(s.cacheDir, `kafka-${VERSIONS.kafka}`, 'libs');
    const java = findJava17();
    if (first) {
      await this.kafka.install(log);
      fs.mkdirSync(logDirs, { recursive: true });
      fs.writeFileSync(configFile, serverProperties(this.ports, logDirs));
      fs.writeFileSync(path.join(dataDir, 'log4j2.properties'), KAFKA_LOG4J2);
    }
    const log4j = path.join(dataDir, 'log4j2.properties');
    const cp = classpath(libDir);
    if (!fs.existsSync(path.join(logDirs, 'meta.properties'))) {
      execFileSync(java, [`-Dlog4j2.configurationFile=${log4j}`, '-cp', cp, 'kafka.tools.StorageTool', 'format', '-t', kafkaClusterId(), '-c', configFile], {
        stdio: 'pipe',
      });
    }
    startDetached(
      this.kafka.process,
      java,
      // C1 only: a much cheaper start (and restart after kill -9) on a busy machine; the chaos load is small.
      kafkaJvmArgs({ heapMb: s.kafka.heapMb, log4j, logsDir: dataDir, classpath: cp, configFile, jvmFlags: ['-XX:TieredStopAtLevel=1'] }),
    );
    await this.waitReady(this.kafka);
    await this.kafka.afterReady?.(log);
  }

  killKafka(): void {
    killGroup(livePid(this.kafka.process));
  }

  async stopTemporal(): Promise<void> {
    await stopProcess(this.temporal.process, 15_000);
  }

  async startTemporal(): Promise<void> {
    await this.temporal.start(() => {});
    await this.waitReady(this.temporal);
  }

  killCassandra(): void {
    if (this.cassandra) killGroup(livePid(this.cassandra.process));
  }

  /** SIGTERM: Cassandra drains (flushes its memtables) before it exits. */
  async stopCassandra(): Promise<void> {
    if (this.cassandra) await stopProcess(this.cassandra.process, 30_000);
  }

  async startCassandra(): Promise<void> {
    if (!this.cassandra) return;
    // A killed JVM's port may linger for a moment; the pid file names the dead process.
    await this.cassandra.start(() => {});
    await this.waitReady(this.cassandra);
  }

  logFiles(): string[] {
    return [this.kafka, this.temporal, this.cassandra].flatMap((s) => (s ? [s.process.logFile] : []));
  }

  async down(): Promise<void> {
    await Promise.all([this.kafka, this.temporal, this.cassandra].map((s) => (s ? stopProcess(s.process, 20_000) : undefined)));
  }

  private async waitReady(server: Server, timeoutMs = 180_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await server.probe()) return;
      if (livePid(server.process) === undefined) throw new Error(`${server.name} exited before it became ready; log: ${server.process.logFile}`);
      await sleep(300);
    }
    throw new Error(`${server.name} not ready within ${timeoutMs / 1000} s; log: ${server.process.logFile}`);
  }
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

export function serverProperties(p: ChaosPorts, logDirs: string): string {
  return kafkaServerProperties({
    host: HOST,
    port: p.kafka,
    controllerPort: p.kafkaController,
    logDirs,
    comment:
      'Written by chaos/servers.ts: a private single-node KRaft broker+controller for the chaos suite.\n' +
      'PLAINTEXT: the driver, directly. PROXIED: the workers, through the chaos TCP proxy (advertised).',
    extraListener: { name: 'PROXIED', port: p.kafkaProxied, advertisedPort: p.kafkaProxy },
  });
}
