import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'cassandra-driver';
import { findJava17 } from '../java';
import { classpath, fetchJars } from '../maven';
import { portOpen, startDetached } from '../processes';
import { type InfraSettings, VERSIONS } from '../settings';
import { processFor, type Server } from './server';

/** Writes a node's config and logback files and starts its JVM, detached. */
export function startCassandraNode(o: {
  proc: ReturnType<typeof processFor>;
  heapMb: number;
  dataDir: string;
  configFile: string;
  yaml: string;
  libDir: string;
  /** More -D options. */
  extraJvmOptions?: readonly string[];
}): void {
  const java = findJava17();
  fs.mkdirSync(path.join(o.dataDir, 'storage'), { recursive: true });
  fs.writeFileSync(o.configFile, o.yaml);
  const logback = path.join(o.dataDir, 'logback.xml');
  fs.writeFileSync(logback, LOGBACK);
  startDetached(o.proc, java, [
    `-Xms${o.heapMb}m`,
    `-Xmx${o.heapMb}m`,
    ...JVM17_OPTIONS,
    `-Dcassandra.config=file://${o.configFile}`,
    `-Dcassandra.storagedir=${path.join(o.dataDir, 'storage')}`,
    `-Dcassandra.logdir=${o.dataDir}`,
    '-Dcassandra-foreground=yes',
    `-Dlogback.configurationFile=${logback}`,
    // Single node: nothing to gossip with. Not cassandra.unsafesystem: without it flushed, a schema
    // change does not survive a kill -9 — the node comes back without the tables created since,
    // the commit log's writes to them are skipped as "unknown CF", and a re-created table is empty.
    '-Dcassandra.skip_wait_for_gossip_to_settle=0',
    ...(o.extraJvmOptions ?? []),
    '-cp',
    classpath(o.libDir),
    'org.apache.cassandra.service.CassandraDaemon',
  ]);
}

/** Cassandra 5.0, one node, from Maven Central's cassandra-all and its runtime dependencies. */
export function cassandraServer(s: InfraSettings): Server {
  const c = s.cassandra;
  const home = path.join(s.cacheDir, `cassandra-${VERSIONS.cassandra}`);
  const libDir = path.join(home, 'libs');
  const dataDir = path.join(s.dataDir, 'cassandra');
  const configFile = path.join(dataDir, 'cassandra.yaml');
  const address = `${c.host}:${c.port}`;
  const proc = processFor(s, 'cassandra', configFile);

  return {
    name: 'cassandra',
    version: VERSIONS.cassandra,
    address,
    links: {},
    process: proc,
    install: async (log) =>
      (
        await fetchJars({
          cacheDir: s.cacheDir,
          libDir,
          log,
          artifacts: [{ groupId: 'org.apache.cassandra', artifactId: 'cassandra-all', version: VERSIONS.cassandra }],
        })
      ).fetched,
    start: async () => startCassandraNode({ proc, heapMb: c.heapMb, dataDir, configFile, yaml: cassandraYaml(s), libDir }),
    probe: async () => {
      if (!(await portOpen(c.host, c.port))) return false;
      const client = new Client({
        contactPoints: [address],
        localDataCenter: 'datacenter1',
        socketOptions: { connectTimeout: 2000, readTimeout: 3000 },
      });
      try {
        await client.connect();
        const rs = await client.execute('SELECT release_version FROM system.local');
        return rs.rows.length === 1;
      } catch {
        return false;
      } finally {
        await client.shutdown().catch(() => undefined);
      }
    },
  };
}

function cassandraYaml(s: InfraSettings): string {
  return nodeYaml(s.cassandra, 'kafka-flow-temporal', 'a single Cassandra node for development and tests');
}

/**
 * The settings every node of ours has: one token ring of its own, on `node`'s ports. The commit log
 * is synced before a write is acknowledged (`batch`): a single node with Cassandra's default
 * (`periodic`, 10 s) acknowledges writes a kill -9 then loses (the replay reads only the synced
 * part) — under an offset already committed, which no flow can recover from. A replicated cluster
 * (RF ≥ 3, QUORUM) keeps them on the other replicas instead. scripts/cassandra-kill9-durability.ts
 * measures it (periodic: 100 and 164 of 2,000 acknowledged rows lost; batch: none). Every write then
 * waits for an fsync, which on a loaded 2-core machine can outlast the default 2 s write and 1 s
 * Paxos timeouts: raised.
 */
export function nodeYaml(node: { host: string; port: number; storagePort: number }, clusterName: string, what: string): string {
  return `# Written by kafka-flow-temporal infra: ${what}.
cluster_name: ${clusterName}
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
commitlog_sync: batch
write_request_timeout: 10000ms
cas_contention_timeout: 5000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "${node.host}:${node.storagePort}"
listen_address: ${node.host}
rpc_address: ${node.host}
storage_port: ${node.storagePort}
native_transport_port: ${node.port}
start_native_transport: true
`;
}

/** From Cassandra 5.0's conf/jvm17-server.options: the module access it needs on Java 17. */
export const JVM17_OPTIONS = [
  '-XX:+UseG1GC',
  '-XX:+ParallelRefProcEnabled',
  '-Djdk.attach.allowAttachSelf=true',
  '-Dio.netty.tryReflectionSetAccessible=true',
  ...[
    'java.base/jdk.internal.misc',
    'java.management.rmi/com.sun.jmx.remote.internal.rmi',
    'java.rmi/sun.rmi.registry',
    'java.rmi/sun.rmi.server',
    'java.sql/java.sql',
    'java.base/java.lang.ref',
    'jdk.unsupported/sun.misc',
    'jdk.compiler/com.sun.tools.javac.file',
    'jdk.attach/sun.tools.attach',
  ].flatMap((m) => ['--add-exports', `${m}=ALL-UNNAMED`]),
  ...[
    'java.base/java.lang.module',
    'java.base/jdk.internal.loader',
    'java.base/jdk.internal.ref',
    'java.base/jdk.internal.reflect',
    'java.base/jdk.internal.math',
    'java.base/jdk.internal.module',
    'java.base/jdk.internal.util.jar',
    'jdk.management/com.sun.management.internal',
    'java.base/sun.nio.ch',
    'java.base/java.io',
    'java.base/java.lang.reflect',
    'jdk.compiler/com.sun.tools.javac',
    'java.base/java.lang',
    'java.base/java.util',
  ].flatMap((m) => ['--add-opens', `${m}=ALL-UNNAMED`]),
];

export const LOGBACK = `<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT" /></root>
</configuration>
`;
