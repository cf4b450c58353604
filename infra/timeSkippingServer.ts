import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findJava17 } from './java';
import { classpath, fetchJars } from './maven';
import { portOpen } from './processes';
import { type InfraSettings, VERSIONS } from './settings';

/**
 * Temporal's time-skipping test server, for workflow tests whose waits are workflow timers: the
 * Java SDK's `io.temporal:temporal-test-server`, run from Maven Central's jars. (@temporalio/testing
 * would download a native build of the same server from temporal.download; this fetches the jar
 * the way infra fetches Kafka and Cassandra, into the git-ignored cache.)
 *
 * What it yields is a launcher script: `TestWorkflowEnvironment.createTimeSkipping()` starts it as
 * an `existing-path` executable with the port as its only argument, waits up to 5 s for the port
 * to answer, and kills it on teardown (the script `exec`s the JVM, so the kill reaches the JVM).
 * A cold JVM loading gRPC and protobuf takes 5–6 s on a busy 2-core machine, so the launcher runs
 * it with a class-data-sharing archive dumped here once (≈ 1–1.5 s then) and the C1 compiler only.
 */
export interface TimeSkippingServer {
  readonly version: string;
  readonly launcher: string;
  /** The server's output (the launcher appends to it). */
  readonly logFile: string;
}

const MAIN_CLASS = 'io.temporal.testserver.TestServer';

export async function prepareTimeSkippingServer(s: InfraSettings, log: (line: string) => void): Promise<TimeSkippingServer> {
  const version = VERSIONS.temporalTestServer;
  const home = path.join(s.cacheDir, `temporal-test-server-${version}`);
  const libDir = path.join(home, 'libs');
  await fetchJars({
    cacheDir: s.cacheDir,
    libDir,
    log,
    artifacts: [
      { groupId: 'io.temporal', artifactId: 'temporal-test-server', version },
      // Its logging goes through slf4j; without a backend its errors would be dropped.
      { groupId: 'org.slf4j', artifactId: 'slf4j-simple', version: VERSIONS.slf4j },
    ],
  });
  const java = findJava17();
  const logFile = path.join(s.logDir, 'temporal-test-server.log');
  fs.mkdirSync(s.logDir, { recursive: true });
  const jvmArgs = [
    '-Xmx512m',
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
    '-cp',
    classpath(libDir),
    MAIN_CLASS,
  ];

  // The archive is only valid for this java and this class path: dumped again when either changes.
  const archive = path.join(home, 'classes.jsa');
  const archiveStamp = `${archive}.for`;
  const stamp = JSON.stringify([java, ...jvmArgs]);
  if (!fs.existsSync(archive) || readOr(archiveStamp) !== stamp) {
    fs.rmSync(archive, { force: true });
    log('dumping a class-data-sharing archive of the time-skipping server (once)');
    if (await dumpArchive(java, jvmArgs, archive, logFile)) fs.writeFileSync(archiveStamp, stamp);
    else log(`could not dump the class-data-sharing archive (see ${logFile}); the server starts without it, more slowly`);
  }

  const launcher = path.join(home, 'temporal-test-server');
  const share = fs.existsSync(archive) ? [`-XX:SharedArchiveFile=${archive}`] : [];
  const script = [
    '#!/bin/sh',
    `# Temporal's time-skipping test server ${version}, written by infra/timeSkippingServer.ts.`,
    '# Usage: temporal-test-server <port>',
    `exec ${[java, ...share, ...jvmArgs].map(shellQuote).join(' ')} "$@" >>${shellQuote(logFile)} 2>&1`,
    '',
  ].join('\n');
  if (readOr(launcher) !== script) {
    fs.writeFileSync(`${launcher}.tmp`, script, { mode: 0o755 });
    fs.renameSync(`${launcher}.tmp`, launcher);
  }
  return { version, launcher, logFile };
}

/** Starts the server once with -XX:ArchiveClassesAtExit and stops it with SIGTERM (a clean exit writes the archive). */
async function dumpArchive(java: string, jvmArgs: string[], archive: string, logFile: string): Promise<boolean> {
  const port = await freePort();
  const tmp = `${archive}.tmp`;
  fs.rmSync(tmp, { force: true });
  const out = fs.openSync(logFile, 'a');
  const child = spawn(java, [`-XX:ArchiveClassesAtExit=${tmp}`, ...jvmArgs, String(port)], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const deadline = Date.now() + 60_000;
    while (!(await portOpen('127.0.0.1', port)) && Date.now() < deadline && child.exitCode === null) await sleep(100);
  } finally {
    child.kill('SIGTERM');
    const stopped = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
    if (!stopped) child.kill('SIGKILL');
  }
  if (!fs.existsSync(tmp)) return false;
  fs.renameSync(tmp, archive);
  return true;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function readOr(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
